// The cited page: a PDF page picture with the passage highlighted, or the page's text with the
// passage marked (other formats, or when the picture cannot be made).

import { json, request } from "./api.js";
import { describeError, element, goneFromDocuments } from "./format.js";

const $ = (id) => document.getElementById(id);
let objectUrl = null;
let returnFocus = null;

function pagePath(citation, suffix) {
  const chunk = citation.chunk_id ? `?chunk=${encodeURIComponent(citation.chunk_id)}` : "";
  return `/documents/${encodeURIComponent(citation.document_id)}/pages/${citation.page}${suffix}${chunk}`;
}

function reset() {
  const image = $("viewer-image");
  image.hidden = true;
  image.removeAttribute("src");
  image.dataset.highlightBoxes = "";
  $("viewer-text").hidden = true;
  $("viewer-text").replaceChildren();
  if (objectUrl) URL.revokeObjectURL(objectUrl);
  objectUrl = null;
}

async function showImage(citation) {
  const response = await request(pagePath(citation, ".png"));
  const image = $("viewer-image");
  objectUrl = URL.createObjectURL(await response.blob());
  image.alt = `Page ${citation.page_label} of ${citation.source}, the cited passage highlighted`;
  image.dataset.highlightBoxes = response.headers.get("X-Highlight-Boxes") || "0";
  await new Promise((resolve, reject) => {
    image.onload = resolve;
    image.onerror = reject;
    image.src = objectUrl;
  });
  image.hidden = false;
  const top = Number(response.headers.get("X-Highlight-Top"));
  if (response.headers.has("X-Highlight-Top") && Number.isFinite(top)) {
    // Bring the highlighted passage into view, a little below the dialog's top edge.
    const dialog = $("viewer");
    const passageY = image.offsetTop + top * image.clientHeight;
    if (passageY > dialog.clientHeight - 120) dialog.scrollTop = passageY - 120;
  }
}

async function showText(citation) {
  const page = await json(pagePath(citation, "/text"));
  const view = $("viewer-text");
  view.setAttribute("dir", "auto");
  if (page.highlight) {
    const { start, end } = page.highlight;
    const mark = element("mark", { text: page.text.slice(start, end) });
    view.replaceChildren(page.text.slice(0, start), mark, page.text.slice(end));
    view.hidden = false;
    mark.scrollIntoView({ block: "center" });
  } else {
    view.replaceChildren(page.text);
    view.hidden = false;
  }
}

const PICTURED = /\.(pdf|png|jpe?g|tiff?|webp)$/i;

export async function openCitation(citation, opener) {
  const dialog = $("viewer");
  const status = $("viewer-status");
  returnFocus = opener || null;
  reset();
  $("viewer-title").replaceChildren(
    `[${citation.marker}] `,
    element("bdi", { text: citation.source }),
    `, page ${citation.page_label}`,
  );
  status.textContent = "Loading the page…";
  if (!dialog.open) dialog.showModal();
  // PDFs and scanned images have page pictures (an image is kept as a PDF of its frames).
  const pictured = PICTURED.test(citation.source);
  try {
    if (pictured) {
      try {
        await showImage(citation);
        status.textContent = "";
        return;
      } catch (error) {
        if (error.status !== 409) throw error; // no picture of this PDF: show its text instead
      }
    }
    await showText(citation);
    status.textContent = "";
  } catch (error) {
    status.textContent = error.status === 404 && await documentGone(citation)
      ? goneFromDocuments(citation.source) : describeError(error, "Opening the page");
  }
}

// Whether the cited document itself is gone (a page's 404 may also be a page past its end).
async function documentGone(citation) {
  try {
    await json(`/documents/${encodeURIComponent(citation.document_id)}`);
    return false;
  } catch (error) {
    return error.status === 404;
  }
}

export function closeViewer() {
  const dialog = $("viewer");
  if (dialog.open) dialog.close();
}

export function setUpViewer() {
  const dialog = $("viewer");
  $("viewer-close").addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => {
    reset();
    if (returnFocus) returnFocus.focus();
  });
}
