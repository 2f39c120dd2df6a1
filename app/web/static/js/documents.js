// Documents: drag-and-drop uploads with a progress bar per file, the list (by page, filtered by
// the start of a name), and deletion.

import { ApiError, everyListed, json, request, sessionToken, token } from "./api.js";
import { loadCollections, uploadCollection } from "./collections.js";
import { closeConfirm, confirmAction } from "./confirm.js";
import {
  closeDocumentDetails,
  openDocumentDetails,
  uploaderName,
  whenDocumentChanged,
} from "./document-details.js";
import {
  counted, describeError, drawPager, element, formatBytes, goneFromDocuments, sleep, smallButton,
} from "./format.js";
import { mayDeleteDocument, roleAtLeast } from "./roles.js";

const POLL_MS = 400;
const MAX_RATE_LIMIT_RETRIES = 30;
const STAGES = {
  ocr: "Reading scanned pages", parsed: "Parsed", embedding: "Embedding", queued: "Queued",
};
// Of the bar, reading pages takes this share when a file needs OCR (a page takes seconds),
// else a tenth; embedding the chunks takes the rest.
const OCR_SHARE = 0.7;
const PARSE_SHARE = 0.1;

const $ = (id) => document.getElementById(id);
let uploadCounter = 0;
let shownDocuments = []; // the last listing, drawn again when the caller's role is known
let failureReasons = new Map(); // document id -> why its latest upload failed (GET /jobs)
let explained = null; // the listing whose failures were looked up
const LIST_PAGE = 100; // documents in the table at once; the pager and the name filter reach the rest
const TYPING_MS = 250; // the name filter lists again this long after the last key
let listOffset = 0;
let listLoads = 0; // only the latest listing is drawn (the filter changes quickly)
let typing = 0;
let listFailure = ""; // why the last listing failed, while the status line still says so

function uploadRow(file) {
  uploadCounter += 1;
  const labelId = `upload-${uploadCounter}`;
  const bar = element("progress", { attrs: { max: "1", value: "0", "aria-labelledby": labelId } });
  const state = element("span", { className: "state", text: "Uploading…" });
  const name = element("bdi", { className: "name", text: file.name, attrs: { id: labelId } });
  const row = element("li", { attrs: { "data-file": file.name } }, [
    name, bar, element("div", { attrs: { "aria-live": "polite" } }, [state]),
  ]);
  $("uploads").prepend(row);
  return {
    row,
    show(fraction, text) {
      if (fraction === null) bar.removeAttribute("value");
      else bar.value = fraction;
      state.textContent = text;
    },
    finish(outcome, text) {
      row.classList.add(outcome);
      row.dataset.outcome = outcome;
      if (outcome === "done") bar.value = 1;
      else bar.hidden = true; // a failed file has no progress to show (nor a moving bar)
      state.textContent = text;
    },
  };
}

// Pages read (by OCR, when a file has scanned pages) come first, then chunks embedded;
// `seen.ocr` remembers a file that had an OCR stage, so its bar never moves back.
function jobFraction(job, seen) {
  const { done, total, stage } = job.progress;
  if (job.status === "done") return 1;
  if (stage === "ocr") seen.ocr = true;
  const parsed = seen.ocr ? OCR_SHARE : PARSE_SHARE;
  if (stage === "ocr") return total > 0 ? OCR_SHARE * (done / total) : 0;
  if (stage === "embedding" && total > 0) return parsed + (1 - parsed) * (done / total);
  if (stage === "parsed") return parsed;
  return 0;
}

function jobText(job) {
  const { done, total, stage } = job.progress;
  if (job.status === "queued") return "Queued";
  const label = STAGES[stage] || "Processing";
  if (stage === "embedding") return `${label}: ${done} / ${total} chunks`;
  if (stage === "ocr") return `${label}: ${done} / ${total} pages`;
  if (stage === "parsed") return `${label}: ${counted(total, "page")}`;
  return label;
}

async function postFile(file, ui) {
  for (let attempt = 0; ; attempt += 1) {
    const body = new FormData();
    const collection = uploadCollection();
    if (collection) body.append("collection", collection); // before the file: read first
    body.append("file", file, file.name);
    try {
      return await json("/documents", { method: "POST", body });
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 429 ||
          attempt >= MAX_RATE_LIMIT_RETRIES) throw error;
      const wait = Math.max(1, error.retryAfter || 5);
      ui.show(null, `Waiting ${wait} s: ${error.message}`);
      await sleep(wait * 1000);
    }
  }
}

// Every upload's job is watched by one loop: each round lists the tenant's jobs still to index
// (a page or a few, whatever the number of files) and fetches a watched job on its own only
// once it has left that listing, for its outcome. A folder of files is then a request or two per
// round, not one per file.
const watched = new Map(); // job id -> { ui, seen, resolve, reject }
let watching = false;
// A document was added or a job ended since the list was drawn: the loop redraws it once per
// round, however many files changed in it.
let listStale = false;

async function refreshIfStale() {
  if (!listStale || !sessionToken()) return; // nothing new, or the session has ended
  listStale = false;
  await refreshList();
}

function watchJob(jobId, ui) {
  return new Promise((resolve, reject) => {
    watched.set(jobId, { ui, seen: { ocr: false }, resolve, reject });
    if (!watching) watchAll();
  });
}

async function jobsToIndex() {
  const pending = await everyListed("/jobs?status=queued&status=processing");
  return new Map(pending.map((job) => [job.job_id, job]));
}

// Shows a job's state on its row; true once it has ended.
function showJob(job, watch) {
  const { ui, seen } = watch;
  if (job.status === "done") {
    const size = `${counted(job.pages, "page")}, ${counted(job.chunks_indexed, "chunk")}`;
    // Pages OCR could not read are named, so the user knows what is missing.
    const warnings = (job.warnings || []).join("; ");
    ui.finish("done", warnings ? `Done: ${size}. ${warnings}` : `Done: ${size}`);
    return true;
  }
  if (job.status === "failed") {
    ui.finish("failed", `Indexing failed: ${job.error || "unknown error"}`);
    return true;
  }
  ui.show(jobFraction(job, seen), jobText(job));
  return false;
}

async function watchRounds() {
  while (watched.size) {
    // A row leaves the page on sign-out: stop polling for a session that has ended.
    for (const [jobId, watch] of watched) if (!watch.ui.row.isConnected) settle(jobId);
    if (!watched.size) return;
    await refreshIfStale();
    // Only the jobs watched before the listing was asked for: one accepted while it was on its
    // way is not in it, and fetching it on its own would count it as ended (it waits a round).
    const asked = [...watched.keys()];
    const pending = await jobsToIndex();
    for (const jobId of asked) {
      if (!watched.has(jobId)) continue;
      const job = pending.get(jobId) || await json(`/jobs/${encodeURIComponent(jobId)}`);
      if (watched.has(jobId) && showJob(job, watched.get(jobId))) {
        listStale = true;
        settle(jobId);
      }
    }
    if (watched.size) await sleep(POLL_MS);
  }
}

function settle(jobId, error) {
  const watch = watched.get(jobId);
  watched.delete(jobId);
  if (error) watch.reject(error);
  else watch.resolve();
}

async function watchAll() {
  watching = true;
  try {
    do {
      await watchRounds();
      await refreshIfStale(); // a file accepted while this ran is watched in another round
    } while (watched.size);
  } catch (error) {
    for (const jobId of [...watched.keys()]) settle(jobId, error);
  } finally {
    watching = false;
  }
}

// Why an upload failed, in words. With no answer at all, it matters whether the server had
// accepted the file: then only the watching of its indexing was lost.
function uploadProblem(file, error, accepted) {
  if (error instanceof ApiError) return describeError(error, `“${file.name}”`);
  if (accepted) {
    return `“${file.name}” was uploaded, but the page lost contact with the server while it ` +
      "was indexed: the list shows how it went once the connection is back.";
  }
  // A server may refuse an oversize body before reading it and close the connection: the
  // browser then reports a network error instead of the 413.
  return `“${file.name}” could not be sent: the connection closed before the server answered ` +
    "(the file may be too large for the server, or the server is unreachable)";
}

async function uploadOne(file) {
  const ui = uploadRow(file);
  let accepted = false;
  try {
    const job = await postFile(file, ui);
    accepted = true;
    ui.show(0, "Queued");
    listStale = true; // the watching loop shows the new document in the list
    await watchJob(job.job_id, ui);
  } catch (error) {
    ui.finish("failed", uploadProblem(file, error, accepted));
  }
}

export async function uploadFiles(files) {
  const session = sessionToken();
  if (!session) return; // the session is over: nothing is sent
  if (!roleAtLeast("member")) {
    $("documents-status").textContent = "Your role may not upload documents.";
    return;
  }
  // One request at a time keeps the order predictable; the jobs still run in parallel.
  const pending = [];
  for (const file of files) {
    if (token() !== session) break; // signed out in the meantime: the rest stay unsent
    pending.push(uploadOne(file));
    await sleep(50);
  }
  await Promise.all(pending);
}

// A listed document the server no longer shows this person (deleted or moved elsewhere since
// the list was drawn): said in words, and the list drawn again without it.
async function showGone(doc) {
  $("documents-status").textContent = goneFromDocuments(doc.source);
  await refreshList();
}

function documentRow(doc, onDelete) {
  const details = smallButton({ text: "Details", label: `Details of ${doc.source}` },
    async () => {
      if (!(await openDocumentDetails(doc, details))) await showGone(doc);
    });
  const actions = element("td", { className: "actions" }, [details]);
  if (mayDeleteDocument(doc)) {
    actions.append(
      smallButton({ text: "Delete", label: `Delete ${doc.source}` }, () => onDelete(doc)));
  }
  // A failed document says why under its name (the status column stays narrow).
  const reason = doc.status === "failed" ? failureReasons.get(doc.document_id) : undefined;
  const name = element("td", { className: "name" }, [
    element("bdi", { text: doc.source }),
    ...(reason ? [element("div", { className: "hint reason", text: reason })] : []),
  ]);
  return element("tr", { attrs: { "data-document": doc.document_id } }, [
    name,
    element("td", { className: "num in-details", text: formatBytes(doc.size_bytes) }),
    element("td", { className: "num in-details", text: String(doc.pages) }),
    element("td", { className: "num in-details", text: String(doc.chunks) }),
    element("td", {}, [element("span", { className: `badge ${doc.status}`, text: doc.status })]),
    element("td", { className: "in-details" }, [element("bdi", { text: uploaderName(doc) })]),
    actions,
  ]);
}

function confirmDelete(doc) {
  return confirmAction({
    title: "Delete document?",
    text:
      `“${doc.source}” and its ${counted(doc.chunks, "indexed chunk")} will be removed; ` +
      "answers will no longer cite it.",
    action: "Delete",
  });
}

async function deleteDocument(doc) {
  if (!(await confirmDelete(doc))) return;
  const status = $("documents-status");
  try {
    await request(`/documents/${encodeURIComponent(doc.document_id)}`, { method: "DELETE" });
    status.textContent = `Deleted “${doc.source}”.`;
  } catch (error) {
    if (error.status === 404) {
      await showGone(doc);
      return;
    }
    status.textContent = describeError(error, `Deleting “${doc.source}”`);
  }
  await refreshList();
}

// The documents of the last listing (their metadata suggests the fields to filter on).
export function listedDocuments() {
  return shownDocuments;
}

// The page of the listing at `listOffset`, of the documents whose name starts with what the
// name filter says (all, when it is empty).
export async function refreshList() {
  const status = $("documents-status");
  const ticket = ++listLoads;
  const prefix = $("documents-name").value.trim();
  const query = new URLSearchParams({ limit: String(LIST_PAGE), offset: String(listOffset) });
  if (prefix) query.set("source_prefix", prefix);
  try {
    const listing = await json(`/documents?${query}`);
    if (ticket !== listLoads) return;
    if (!listing.data.length && listOffset > 0 && listing.count > 0) {
      // The last page emptied (its documents deleted, or fewer match): show the new last one.
      listOffset = Math.floor((listing.count - 1) / LIST_PAGE) * LIST_PAGE;
      await refreshList();
      return;
    }
    shownDocuments = listing.data;
    // The list loads again: a failure it showed is over (a message shown since then stays).
    if (listFailure && status.textContent === listFailure) status.textContent = "";
    listFailure = "";
    drawDocuments();
    $("documents-empty").textContent = prefix
      ? `No document's name starts with “${prefix}”.` : "No documents yet.";
    drawPager($("documents-pager"),
      { offset: listOffset, limit: LIST_PAGE, count: listing.count, label: "Documents" },
      (next) => { listOffset = next; refreshList(); });
  } catch (error) {
    if (ticket !== listLoads) return;
    listFailure = describeError(error, "Loading the documents");
    status.textContent = listFailure;
  }
}

function filterSoon() {
  clearTimeout(typing);
  typing = setTimeout(() => {
    listOffset = 0;
    refreshList();
  }, TYPING_MS);
}

// The list again from the last listing, with the controls the caller's role allows.
export function drawDocuments() {
  const body = $("documents-body");
  body.replaceChildren(...shownDocuments.map((doc) => documentRow(doc, deleteDocument)));
  $("documents-empty").hidden = shownDocuments.length > 0;
  $("documents-table").hidden = shownDocuments.length === 0;
  if (explained !== shownDocuments) explainFailures(shownDocuments);
}

// Why the listed documents that failed did, from one GET /jobs?status=failed (newest first, so
// a document's first job there is its latest failure), then drawn under their names. Only
// members and up may list jobs: for a reader, or when the listing fails, the badge shows alone.
async function explainFailures(listing) {
  if (!listing.some((doc) => doc.status === "failed") || !roleAtLeast("member")) return;
  explained = listing;
  try {
    const failed = await json("/jobs?status=failed&limit=100");
    if (shownDocuments !== listing) return; // a newer listing is shown and explains itself
    failureReasons = new Map();
    for (const job of failed.data) {
      if (job.error && !failureReasons.has(job.document_id)) {
        failureReasons.set(job.document_id, job.error);
      }
    }
    drawDocuments();
  } catch {
    // the badge alone; the next listing tries again
  }
}

// Back to an empty panel (on sign-out and before a session starts): nothing of the last session.
export function resetDocuments() {
  $("uploads").replaceChildren();
  $("documents-body").replaceChildren();
  shownDocuments = [];
  failureReasons = new Map();
  explained = null;
  $("documents-status").textContent = "";
  listFailure = "";
  listLoads += 1;
  listOffset = 0;
  clearTimeout(typing);
  $("documents-name").value = "";
  $("documents-pager").replaceChildren();
  $("documents-table").hidden = true;
  $("documents-empty").hidden = true;
  closeConfirm();
  closeDocumentDetails();
}

export function setUpDocuments() {
  // A moved document changes the collections' counts too.
  whenDocumentChanged(() => Promise.all([refreshList(), loadCollections()]));
  $("documents-name").addEventListener("input", filterSoon);
  $("documents-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(typing);
    listOffset = 0;
    refreshList();
  });
  const zone = $("drop-zone");
  const input = $("file-input");
  input.addEventListener("change", () => {
    const files = [...input.files];
    input.value = "";
    if (files.length) uploadFiles(files);
  });
  zone.addEventListener("dragover", (event) => {
    event.preventDefault();
    zone.classList.add("dragging");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("dragging"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("dragging");
    const files = [...(event.dataTransfer?.files || [])];
    if (files.length) uploadFiles(files);
  });
  // A file dropped anywhere else (the sign-in page too) must not make the browser leave the app
  // to open it.
  for (const type of ["dragover", "drop"]) {
    window.addEventListener(type, (event) => {
      if (event.dataTransfer?.types.includes("Files")) event.preventDefault();
    });
  }
}
