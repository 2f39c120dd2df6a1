"""Which way to call Tesseract: one `tesseract` subprocess per page (what the service does) or
tesserocr in the process (its manylinux wheel bundles its own Tesseract and Leptonica).

One full A4 page of English text (11 pt, 200 dpi) read `--rounds` times each way with
`eng+ara`, one thread (OMP_THREAD_LIMIT=1, as the service runs it). tesserocr is not a
dependency of the service; run this where it is installed, e.g. a scratch venv:

    python -m venv tmp/tesserocr-venv && tmp/tesserocr-venv/bin/pip install tesserocr pillow
    PYTHONPATH=. tmp/tesserocr-venv/bin/python -m bench.ocr_binding
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import time

from PIL import Image, ImageDraw, ImageFont

TEXT = (
    "The north pumping station is inspected every spring by the river authority. Operators "
    "record the pressure readings twice a day and report any fault to the control room within "
    "one hour. "
) * 12
DPI = 200
TESSDATA = "/usr/share/tesseract-ocr/5/tessdata/"


def _page() -> Image.Image:
    width, height = int(8.27 * DPI), int(11.69 * DPI)
    page = Image.new("L", (width, height), 255)
    pen = ImageDraw.Draw(page)
    font = ImageFont.truetype(
        "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf", round(11 * DPI / 72)
    )
    line, y = "", DPI
    for word in TEXT.split():
        if line and font.getlength(f"{line} {word}") > width - 2 * DPI:
            pen.text((DPI, y), line, font=font, fill=0)
            y += round(11 * DPI / 72 * 1.5)
            line = word
        else:
            line = f"{line} {word}".strip()
    pen.text((DPI, y), line, font=font, fill=0)
    return page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import tesserocr  # only here: not a dependency of the service

    os.environ["OMP_THREAD_LIMIT"] = "1"
    page = _page()
    buffer = io.BytesIO()
    page.save(buffer, format="PPM")
    command = ["tesseract", "stdin", "stdout", "-l", "eng+ara", "--dpi", str(DPI), "tsv"]
    subprocess_s, in_process_s = [], []
    with tesserocr.PyTessBaseAPI(path=TESSDATA, lang="eng+ara") as api:
        for _ in range(args.rounds):
            started = time.perf_counter()
            subprocess.run(command, input=buffer.getvalue(), capture_output=True, check=True)
            subprocess_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            api.SetImage(page)
            api.SetSourceResolution(DPI)
            api.GetTSVText(0)
            in_process_s.append(time.perf_counter() - started)
    print("| binding | s/page median | s/page max |")
    print("|---|---|---|")
    for name, times in (("tesseract subprocess", subprocess_s), ("tesserocr", in_process_s)):
        print(f"| {name} | {statistics.median(times):.2f} | {max(times):.2f} |")
    print(f"tesserocr's Tesseract: {tesserocr.tesseract_version().splitlines()[0]}")


if __name__ == "__main__":
    main()
