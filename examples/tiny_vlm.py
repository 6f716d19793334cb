"""A tiny vision-language model that learns to caption the demo images; trains on a CPU.

A small convolutional encoder turns each image into ``IMAGE_TOKENS`` embeddings (a 2x2 grid of
patches); they replace the image placeholder tokens of the sequence (see
``stoker.integrations.sequences``), and a one-layer causal transformer predicts the caption.
"""

from __future__ import annotations

import torch
from torch import nn

from stoker.integrations.sequences import MultiModalBatch

IMAGE_TOKENS = 4  # placeholders per image: a 2x2 grid of patch embeddings


class TinyVLM(nn.Module):
    def __init__(
        self, vocab_size: int, seq_length: int, image_token_id: int = -200, width: int = 64
    ) -> None:
        super().__init__()
        self.image_token_id = image_token_id
        self.vision = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1),
            nn.GELU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1),
            nn.GELU(),
            nn.Conv2d(64, width, 3, stride=2, padding=1),
            nn.GELU(),
            nn.AdaptiveAvgPool2d(2),  # (N, width, 2, 2): IMAGE_TOKENS patches
        )
        self.embed = nn.Embedding(vocab_size, width)
        self.position = nn.Embedding(seq_length, width)
        layer = nn.TransformerEncoderLayer(
            width, nhead=4, dim_feedforward=2 * width, dropout=0.0, batch_first=True
        )
        self.decoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab_size)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(seq_length))

    def forward(self, batch: MultiModalBatch) -> torch.Tensor:
        """Logits ``(B, S, vocab)`` for each position's next token."""
        is_image = batch.tokens == self.image_token_id
        x = self.embed(batch.tokens.clamp(min=0))
        if batch.images.numel():
            patches = self.vision(batch.images).flatten(2).transpose(1, 2)  # (N, 4, width)
            x = x.masked_scatter(is_image[..., None], patches.reshape(-1, x.shape[-1]))
        x = x + self.position(batch.position_ids)
        return self.head(self.decoder(x, mask=self.causal, is_causal=True))

    def loss(self, batch: MultiModalBatch) -> torch.Tensor:
        """Cross-entropy on the caption tokens (labels of other positions are ignored)."""
        logits = self(batch)
        return nn.functional.cross_entropy(
            logits.flatten(0, 1), batch.labels.flatten(), ignore_index=-100
        )

    @torch.no_grad()
    def caption(
        self, batch: MultiModalBatch, row: int, prompt_length: int, steps: int
    ) -> list[int]:
        """Greedy continuation of row ``row`` after its first ``prompt_length`` tokens."""
        tokens = batch.tokens[row : row + 1, :prompt_length].clone()
        out: list[int] = []
        for _ in range(steps):
            n = tokens.shape[1]
            view = MultiModalBatch(
                __key__=batch.__key__[row : row + 1],
                images=batch.images[row : row + 1],
                num_images=batch.num_images[row : row + 1],
                tokens=nn.functional.pad(tokens, (0, self.causal.shape[0] - n)),
                labels=batch.labels[row : row + 1],
                loss_mask=batch.loss_mask[row : row + 1],
                position_ids=torch.arange(self.causal.shape[0])[None],
                segment_ids=batch.segment_ids[row : row + 1],
            )
            next_id = int(self(view)[0, n - 1].argmax())
            out.append(next_id)
            tokens = torch.cat([tokens, torch.tensor([[next_id]])], dim=1)
        return out
