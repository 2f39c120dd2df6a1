// Ask: the answer streams in token by token; its [n] markers become links to the cited pages.

import { request, sessionToken } from "./api.js";
import { resetFeedback, showFeedback } from "./feedback.js";
import { checkedScope } from "./filter-rows.js";
import { clearSearchResults, searchScope } from "./filters.js";
import { describeError, element } from "./format.js";
import { readEvents } from "./sse.js";
import { openCitation } from "./viewer.js";

const MARKER_GROUP = /\[(\d+(?:\s*,\s*\d+)*)\]/g;
const $ = (id) => document.getElementById(id);
const CUT_SHORT = "The answer stopped before it was finished (the connection was cut): ask again.";
let streaming = null; // the AbortController of the answer being read, if any

function markerLink(number, citation) {
  const link = element("a", {
    text: `[${number}]`,
    className: "marker",
    attrs: {
      href: `#cite-${number}`,
      "data-marker": String(number),
      "aria-label": `Source ${number}: ${citation.source}, page ${citation.page_label}`,
    },
  });
  link.addEventListener("click", (event) => {
    event.preventDefault();
    openCitation(citation, link);
  });
  return link;
}

// The answer as text nodes and marker links; a marker without a citation stays plain text.
export function renderAnswer(container, text, citations) {
  const byMarker = new Map(citations.map((c) => [c.marker, c]));
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(MARKER_GROUP)) {
    nodes.push(document.createTextNode(text.slice(last, match.index)));
    const numbers = match[1].split(",").map((n) => Number(n.trim()));
    numbers.forEach((number, i) => {
      if (i > 0) nodes.push(document.createTextNode(" "));
      const citation = byMarker.get(number);
      nodes.push(citation ? markerLink(number, citation) : document.createTextNode(`[${number}]`));
    });
    last = match.index + match[0].length;
  }
  nodes.push(document.createTextNode(text.slice(last)));
  container.replaceChildren(...nodes);
}

function renderCitations(citations) {
  const list = $("citations");
  list.replaceChildren(
    ...citations.map((citation) => {
      const open = element("button", { attrs: { type: "button" } }, [
        element("bdi", { text: citation.source }),
        document.createTextNode(`, page ${citation.page_label}`),
      ]);
      open.addEventListener("click", () => openCitation(citation, open));
      return element("li", { attrs: { id: `cite-${citation.marker}`, value: String(citation.marker) } }, [
        open,
        element("span", { className: "snippet", text: citation.snippet, attrs: { dir: "auto" } }),
      ]);
    }),
  );
  $("sources-title").hidden = citations.length === 0;
}

async function ask(question) {
  if (!sessionToken()) return; // the session is over: nothing is sent
  const answer = $("answer");
  const status = $("ask-status");
  const scope = checkedScope(searchScope, status);
  if (scope === null) return;
  clearSearchResults();
  const button = $("ask-button");
  let text = "";
  let tokens = 0;
  let ended = false; // the server said the answer is complete (done) or failed (error)
  answer.replaceChildren();
  renderCitations([]);
  showFeedback("");
  answer.setAttribute("aria-busy", "true");
  answer.dataset.state = "streaming";
  button.disabled = true;
  status.textContent = "Searching your documents…";
  if (streaming) streaming.abort(); // one answer at a time (Ctrl+Enter skips the busy button)
  const controller = new AbortController();
  streaming = controller;
  try {
    const response = await request("/query/stream", {
      signal: controller.signal,
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify({ question, ...scope }),
    });
    await readEvents(response, (name, data) => {
      if (name === "token") {
        tokens += 1;
        text += data.text;
        answer.dataset.tokens = String(tokens);
        answer.textContent = text;
        status.textContent = "Answering…";
      } else if (name === "citations") {
        renderAnswer(answer, text, data.citations);
        renderCitations(data.citations);
        answer.dataset.refused = String(Boolean(data.refused));
      } else if (name === "done") {
        ended = true;
        const cache = data.cache === "hit" ? " (from cache)" : "";
        status.textContent = `Answered in ${Math.round(data.total_ms)} ms${cache}.`;
        showFeedback(data.answer_id);
      } else if (name === "error") {
        ended = true;
        status.textContent = `The answer failed: ${data.message}`;
      }
    });
    if (!ended && !controller.signal.aborted) status.textContent = CUT_SHORT;
  } catch (error) {
    if (!controller.signal.aborted) status.textContent = describeError(error, "The question");
  } finally {
    if (streaming === controller) {
      streaming = null;
      answer.setAttribute("aria-busy", "false");
      answer.dataset.state = "done";
      button.disabled = false;
    }
  }
}

// The answer on screen goes (a streaming one stops); the question stays.
export function clearAnswer() {
  if (streaming) streaming.abort();
  streaming = null;
  const answer = $("answer");
  answer.replaceChildren();
  answer.setAttribute("aria-busy", "false");
  for (const key of ["state", "tokens", "refused"]) delete answer.dataset[key];
  renderCitations([]);
  resetFeedback();
  $("ask-button").disabled = false;
}

// Back to an empty panel (on sign-out and before a session starts).
export function resetAsk() {
  clearAnswer();
  $("question").value = "";
  $("ask-status").textContent = "";
}

export function setUpAsk() {
  $("ask-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const question = $("question").value.trim();
    if (question) {
      ask(question);
    } else { // only spaces: the browser's own check lets them through
      $("ask-status").textContent = "Type your question in Question.";
      $("question").focus();
    }
  });
  // Ctrl/Cmd+Enter sends from the text area; Enter alone makes a new line.
  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      $("ask-form").requestSubmit();
    }
  });
}
