// Thumbs under every answer: "Helpful" / "Not helpful" (one rating per person per answer,
// which they may change), and after "Not helpful" an optional picker: which document and page
// should it have used, and a comment. POST /answers/{answer_id}/feedback.

import { json } from "./api.js";
import { describeError, element } from "./format.js";

const $ = (id) => document.getElementById(id);
let answerId = "";
let documentsLoaded = false;

function setPressed(rating) {
  $("rate-up").setAttribute("aria-pressed", String(rating === "up"));
  $("rate-down").setAttribute("aria-pressed", String(rating === "down"));
}

async function send(body) {
  return json(`/answers/${encodeURIComponent(answerId)}/feedback`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
}

// The documents the person may pick from: those the server lists for them.
async function loadDocuments() {
  if (documentsLoaded) return;
  const listing = await json("/documents?limit=100");
  const select = $("expected-document");
  select.replaceChildren(
    element("option", { text: "— choose a document —", attrs: { value: "" } }),
    ...listing.data.map((doc) =>
      element("option", { text: doc.source, attrs: { value: doc.document_id } })),
  );
  documentsLoaded = true;
}

async function rate(rating) {
  const status = $("feedback-status");
  try {
    const stored = await send({ rating });
    setPressed(rating);
    $("feedback-details").hidden = rating !== "down";
    status.textContent = rating === "up"
      ? "Thanks: you rated this answer helpful."
      : "Thanks: you rated this answer not helpful. You can say which page it should have used.";
    if (stored.changed) status.textContent += " (Your earlier rating was changed.)";
    if (rating === "down") await loadDocuments();
  } catch (error) {
    status.textContent = describeError(error, "Your rating");
  }
}

async function sendDetails(event) {
  event.preventDefault();
  const status = $("feedback-status");
  const body = { rating: "down" };
  const documentId = $("expected-document").value;
  const page = Number($("expected-page").value);
  if (documentId) body.expected = [{ document_id: documentId, ...(page >= 1 ? { page } : {}) }];
  const comment = $("feedback-comment").value.trim();
  if (comment) body.comment = comment;
  try {
    await send(body);
    status.textContent = "Thanks: your details were saved.";
    $("feedback-details").hidden = true;
  } catch (error) {
    status.textContent = describeError(error, "Your details");
  }
}

// A new answer is finished: its rating controls appear, unrated.
export function showFeedback(id) {
  answerId = id || "";
  $("feedback").hidden = !answerId;
  $("feedback-details").hidden = true;
  $("feedback-status").textContent = "";
  $("feedback-form").reset();
  setPressed("");
}

export function resetFeedback() {
  showFeedback("");
  documentsLoaded = false;
}

export function setUpFeedback() {
  $("rate-up").addEventListener("click", () => rate("up"));
  $("rate-down").addEventListener("click", () => rate("down"));
  $("feedback-form").addEventListener("submit", sendDetails);
}
