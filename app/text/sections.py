"""Section numbering in headings, shared by page-role detection and heading lookup."""

from __future__ import annotations

import re

# A section number before a title: "2.1 ", "A.3 ", "B. ", "Appendix C ", "IV. ", and an appendix
# letter alone before a capitalised title ("F References", as texinfo bookmarks them).
SECTION_NUMBER = re.compile(
    r"^(?:appendix\s+[A-Z\d]+[.:]?\s*|\d+(?:\.\d+)*\.?\s+|[A-Z](?:\.\d+)+\.?\s+|[A-Z]\.\s+"
    r"|[IVX]+\.\s+|(?-i:[A-Z])\s+(?=(?-i:[A-Z])))",
    re.IGNORECASE,
)
