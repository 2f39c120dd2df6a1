"""Build and save a tiny, randomly initialised BERT cross-encoder (scores mean nothing).

No cross-encoder weights ship in any package here, so tests and the benchmark exercise the real
`CrossEncoder` loading / batching / scoring path with this model instead.
"""

from __future__ import annotations

from pathlib import Path

_WORD_TEXT = (
    "the a of and to in is was what who which when where how why product weight price colour "
    "red blue green handle kg sku item model number page document answer question river city "
    "war year king law school water power"
)
_WORDS = _WORD_TEXT.split()


def save_tiny_cross_encoder(folder: Path, seed: int = 0) -> Path:
    """Write a ~50k-parameter BERT sequence classifier (1 label) and its tokenizer to `folder`."""
    import torch
    from transformers import (  # type: ignore[attr-defined]
        BertConfig,
        BertForSequenceClassification,
        BertTokenizerFast,
    )

    folder.mkdir(parents=True, exist_ok=True)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters, *_WORDS]
    vocab += ["##" + ch for ch in letters]
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("\n".join(dict.fromkeys(vocab)) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True)

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    config.num_labels = 1  # one relevance score per pair
    model = BertForSequenceClassification(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
