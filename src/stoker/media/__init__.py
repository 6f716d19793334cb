"""Video, audio and image media: lazy PyAV decoding, clip sampling and media metadata.

The decoding modules (:mod:`.av_decoder`, :mod:`.uniform`) import torch; the metadata modules
(:mod:`.metadata`, :mod:`.probe`, :mod:`.extract`) do not, so ``stoker prepare-media`` stays
light. PyAV itself is imported only when media is opened (``pip install 'stoker[av]'``).
"""
