// Thumbs under every answer: "Helpful" / "Not helpful" (one rating per person per answer,
// which they may change), and after "Not helpful" an optional picker: which document and page
// should it have used (found by name), and a comment. POST /answers/{answer_id}/feedback.

import { json } from "./api.js";
import { documentFinder } from "./document-finder.js";
import { describeError, jsonBody } from "./format.js";

const $ = (id) => document.getElementById(id);
let answerId = "";
// The documents the person may pick from (those the server lists for them), found by name.
let documents = null;
let documentsLoaded = false;

function setPressed(rating) {
  $("rate-up").setAttribute("aria-pressed", String(rating === "up"));
  $("rate-down").setAttribute("aria-pressed", String(rating === "down"));
}

async function send(body) {
  return json(`/answers/${encodeURIComponent(answerId)}/feedback`, jsonBody("POST", body));
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
    if (rating === "down" && !documentsLoaded) {
      documentsLoaded = true;
      await documents.find();
    }
  } catch (error) {
    status.textContent = describeError(error, "Your rating");
  }
}

async function sendDetails(event) {
  event.preventDefault();
  const status = $("feedback-status");
  const body = { rating: "down" };
  const documentId = $("expected-document").value;
  const typed = $("expected-page").value.trim();
  const page = Number(typed);
  // A page that is no page (-1, 2.5) is named, not left out of what "was saved".
  if (typed && !(Number.isInteger(page) && page >= 1)) {
    status.textContent = "Nothing was sent: the page must be a whole number, 1 or more (or empty).";
    $("expected-page").focus();
    return;
  }
  if (typed && !documentId) {
    status.textContent = "Nothing was sent: choose the document that page is in.";
    $("expected-document").focus();
    return;
  }
  if (documentId) body.expected = [{ document_id: documentId, ...(typed ? { page } : {}) }];
  const comment = $("feedback-comment").value.trim();
  if (comment) body.comment = comment;
  try {
    await send(body);
    status.textContent = "Thanks: your details were saved.";
    $("feedback-details").hidden = true;
  } catch (error) {
    status.textContent = error.status === 422 ? `Your details were not saved: ${error.message}.` :
      describeError(error, "Saving your details");
  }
}

// A new answer is finished: its rating controls appear, unrated.
export function showFeedback(id) {
  answerId = id || "";
  $("feedback").hidden = !answerId;
  $("feedback-details").hidden = true;
  $("feedback-status").textContent = "";
  $("feedback-form").reset();
  documents.reset(); // the search is empty again: the next thumbs-down lists from the start
  documentsLoaded = false;
  setPressed("");
}

export function resetFeedback() {
  showFeedback("");
}

export function setUpFeedback() {
  documents = documentFinder({
    search: $("expected-document-search"),
    picker: $("expected-document"),
    status: $("expected-document-count"),
    none: "— choose a document —",
  });
  $("rate-up").addEventListener("click", () => rate("up"));
  $("rate-down").addEventListener("click", () => rate("down"));
  $("feedback-form").addEventListener("submit", sendDetails);
}
