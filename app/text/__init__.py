"""Text helpers every layer shares: tokens, Arabic normalisation, sentences, script detection."""
