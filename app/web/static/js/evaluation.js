// Evaluation: the tenant's test sets, runs in the background, the chart of a metric over runs,
// and the questions a run missed, each opening in the test bench. Admins also see the feedback
// list here and can make a set from it.

import { openAnswerRecord, resetAnswerRecord, setUpAnswerRecords } from "./answer_record.js";
import { everyListed, json, request, saveFile } from "./api.js";
import { loadBenchPickers, testRetrieval } from "./bench.js";
import { lineChart } from "./chart.js";
import {
  counted, describeError, drawPager, element, formatTime, jsonBody, sleep, smallButton,
} from "./format.js";
import { roleAtLeast } from "./roles.js";

const $ = (id) => document.getElementById(id);
const RATES = new Set(["latency_p95_ms"]);
const RUNS_PAGE = 100; // runs on the chart and in the table at once; the pager goes back further
const FEEDBACK_PAGE = 50; // ratings in the feedback table at once; the pager goes back further
let feedbackOffset = 0;
let feedbackLoads = 0; // only the latest listing is drawn (the rating filter changes quickly)
let runs = [];
let polling = 0; // the poll loop's ticket: a newer one (or a reset) stops the older

function metricName() {
  const select = $("eval-metric");
  return select.options[select.selectedIndex].textContent;
}

function value(number, digits = 3) {
  return typeof number === "number" ? number.toFixed(digits) : "—";
}

function drawChart() {
  const done = runs.filter((r) => r.status === "done");
  $("eval-chart-figure").hidden = done.length === 0;
  if (done.length === 0) return;
  const metric = $("eval-metric").value;
  const points = done.map((run) => ({ x: runDate(run.created_at), y: run.summary[metric] ?? null }));
  const shownWidth = $("eval-chart").clientWidth || undefined; // 0 while its section is hidden
  $("eval-chart").replaceChildren(
    lineChart(metricName(), points, { isRate: !RATES.has(metric), shownWidth }),
  );
  const last = done[done.length - 1];
  $("eval-chart-caption").textContent =
    `${metricName()} over ${done.length} run${done.length === 1 ? "" : "s"}; latest ` +
    `${value(last.summary[metric])} (${formatTime(last.created_at)}).`;
}

// Under a point of the chart: the run's day and time, short.
function runDate(iso) {
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) return iso;
  return when.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

function runRow(run, index) {
  const s = run.summary || {};
  const show = smallButton({ text: "Show misses" }, () => showFailures(run, runs[index - 1]));
  show.hidden = run.status !== "done";
  return element("tr", { attrs: { "data-run": run.run_id } }, [
    element("td", { className: "when", text: formatTime(run.created_at) }),
    element("td", { text: run.status === "processing" ? `running ${run.progress.done}/${run.progress.total}` : run.status }),
    element("td", { className: "num", text: String(run.progress.total) }),
    element("td", { className: "num", text: value(s["page_hit@1"]) }),
    element("td", { className: "num", text: value(s["page_hit@5"]) }),
    element("td", { className: "num", text: value(s["page_mrr@10"]) }),
    element("td", { className: "num", text: value(s["document_mrr@10"]) }),
    element("td", { className: "num", text: value(s.latency_p95_ms, 0) }),
    element("td", { className: "actions" }, [show]),
  ]);
}

function missed(result) {
  if (result.error) return true;
  if (!result.answerable) return result.answer ? !result.answer.refused : false;
  const ranking = result.page || result.document;
  if (ranking && ranking["hit@5"] === 0) return true;
  return Boolean(result.answer && !result.answer.cites_expected);
}

function expectedText(result) {
  if (!result.answerable) return "should be refused (not in the documents)";
  return "expected: " + result.expected.map((e) => `${e.source}${e.page ? ` p. ${e.page}` : ""}`).join("; ");
}

async function showFailures(run, previous) {
  const section = $("eval-failures");
  const list = $("eval-failures-list");
  section.hidden = false;
  $("eval-compare").textContent = "";
  try {
    const full = await json(`/evaluations/runs/${encodeURIComponent(run.run_id)}`);
    const misses = full.results.filter((result) => !result.withheld && missed(result));
    const withheld = full.results.filter((result) => result.withheld).length;
    list.replaceChildren(...misses.map((result) => {
      const open = smallButton({ text: "Open in test bench" }, async () => {
        await testRetrieval(result.question, { anywhere: true });
        $("bench-title").focus();
      });
      return element("li", {}, [
        element("bdi", { text: result.question }),
        element("span", { className: "hint", text: ` (${expectedText(result)})` }),
        open,
      ]);
    }));
    if (misses.length === 0) list.replaceChildren(element("li", { text: "Every question found an expected page in the top 5." }));
    if (withheld) list.append(element("li", { className: "hint", text: `${counted(withheld, "question")} withheld: they are about documents you cannot read.` }));
    if (previous && previous.status === "done") {
      const change = await json(`/evaluations/runs/${encodeURIComponent(run.run_id)}/compare?before=${encodeURIComponent(previous.run_id)}`);
      const docs = change.documents;
      const parts = [`${change.worse.length} questions worse, ${change.better.length} better`];
      if (docs.replaced.length) parts.push(`${docs.replaced.length} documents replaced since (${docs.replaced.join(", ")})`);
      if (docs.added.length) parts.push(`${docs.added.length} added`);
      if (docs.removed.length) parts.push(`${docs.removed.length} removed`);
      if (change.settings_changed.length) parts.push(`settings changed: ${change.settings_changed.join(", ")}`);
      $("eval-compare").textContent = `Since the run before: ${parts.join("; ")}.`;
    }
    $("eval-failures-title").focus();
  } catch (error) {
    $("eval-status").textContent = describeError(error, "Loading the run");
  }
}

// The runs of the chosen set from `offset` (oldest first); none given: the newest page.
async function loadRuns(offset) {
  const setId = $("eval-set").value;
  const pager = $("eval-runs-pager");
  if (!setId) {
    runs = [];
    pager.replaceChildren();
  } else {
    const listed = (from) =>
      json(`/evaluations/runs?${new URLSearchParams({ set_id: setId, limit: RUNS_PAGE, offset: from })}`);
    let from = offset ?? 0;
    let listing = await listed(from);
    if (offset === undefined && listing.count > RUNS_PAGE) {
      from = listing.count - RUNS_PAGE;
      listing = await listed(from);
    }
    runs = listing.data;
    drawPager(pager, { offset: from, limit: RUNS_PAGE, count: listing.count, label: "Runs" },
      (next) => loadRuns(next).catch((error) => {
        $("eval-status").textContent = describeError(error, "Loading the runs");
      }));
  }
  $("eval-runs-table").hidden = runs.length === 0;
  $("eval-runs-body").replaceChildren(...runs.map(runRow));
  $("eval-run").disabled = !setId;
  drawChart();
}

// Every test set the caller sees, newest first, in the set picker.
async function loadSets(selected = "") {
  const sets = await everyListed("/evaluations/sets");
  const select = $("eval-set");
  const keep = selected || select.value;
  select.replaceChildren(...sets.map((set) =>
    element("option", { text: `${set.name} (${counted(set.item_count, "question")})`, attrs: { value: set.set_id } })));
  if (sets.length === 0) {
    select.replaceChildren(element("option", { text: "No test set yet", attrs: { value: "" } }));
  } else if (keep && sets.some((s) => s.set_id === keep)) {
    select.value = keep;
  }
}

async function poll(runId) {
  const ticket = ++polling;
  const bar = $("eval-progress");
  bar.hidden = false;
  while (ticket === polling) {
    const run = await json(`/evaluations/runs/${encodeURIComponent(runId)}`);
    bar.max = Math.max(1, run.progress.total);
    bar.value = run.progress.done;
    $("eval-status").textContent = `Evaluation ${run.status}: ${run.progress.done} of ${run.progress.total} questions.`;
    if (run.status === "done" || run.status === "failed") {
      bar.hidden = true;
      if (run.status === "failed") $("eval-status").textContent = `The evaluation failed: ${run.error}`;
      else $("eval-status").textContent = `Evaluation done: page MRR@10 ${value(run.summary["page_mrr@10"])}.`;
      await loadRuns();
      return;
    }
    await sleep(1000);
  }
}

async function startRun() {
  const status = $("eval-status");
  try {
    const run = await json("/evaluations/runs", jsonBody("POST", {
      set_id: $("eval-set").value, answers: $("eval-answers").checked,
    }));
    status.textContent = "Evaluation queued.";
    await loadRuns();
    await poll(run.run_id);
  } catch (error) {
    status.textContent = describeError(error, "The evaluation");
  }
}

async function setFromFeedback(event) {
  event.preventDefault();
  const status = $("eval-status");
  try {
    const made = await json("/evaluations/sets/from-feedback", jsonBody("POST", {
      name: $("eval-feedback-name").value.trim() || "From feedback",
    }));
    status.textContent = `Test set “${made.name}” made with ${counted(made.item_count, "question")}.`;
    await loadSets(made.set_id);
    await loadRuns();
  } catch (error) {
    status.textContent = describeError(error, "Making the set");
  }
}

async function uploadSet(event) {
  event.preventDefault();
  const status = $("eval-status");
  const file = $("eval-upload-file").files[0];
  if (!file) {
    status.textContent = "Choose a JSONL or CSV file first.";
    return;
  }
  const name = $("eval-upload-name").value.trim() || file.name;
  const format = /\.csv$/i.test(file.name) ? "csv" : "jsonl";
  try {
    const response = await request(`/evaluations/sets/upload?${new URLSearchParams({ name, format })}`, {
      method: "POST",
      headers: { "Content-Type": format === "csv" ? "text/csv" : "application/x-ndjson" },
      body: await file.text(),
    });
    const made = await response.json();
    status.textContent = `Test set “${made.name}” uploaded with ${counted(made.item_count, "question")}.`;
    $("eval-upload-form").reset();
    await loadSets(made.set_id);
    await loadRuns();
  } catch (error) {
    status.textContent = describeError(error, "The upload");
  }
}

// Feedback (admins): the newest ratings, filtered by rating, and the JSONL export.
function feedbackRow(entry) {
  const expected = entry.expected.map((e) => `${e.source}${e.page ? ` p. ${e.page}` : ""}`).join("; ");
  const open = smallButton({ text: "Open answer record" }, () => openAnswerRecord(entry));
  return element("tr", {}, [
    element("td", { className: "when", text: formatTime(entry.updated_at) }),
    element("td", { text: entry.rating === "up" ? "▲ helpful" : "▼ not helpful" }),
    element("td", { className: "name" }, [element("bdi", { text: entry.question ?? "(not kept)" })]),
    element("td", { className: "name", text: expected || "—" }),
    element("td", { className: "name" }, [element("bdi", { text: entry.comment || "—" })]),
    element("td", { className: "actions" }, [open]),
  ]);
}

// The ratings from `feedbackOffset`, newest first, a page at a time.
async function loadFeedback() {
  if (!roleAtLeast("admin")) return;
  const ticket = ++feedbackLoads;
  const query = new URLSearchParams({ limit: String(FEEDBACK_PAGE), offset: String(feedbackOffset) });
  if ($("feedback-rating").value) query.set("rating", $("feedback-rating").value);
  try {
    const listing = await json(`/feedback?${query}`);
    if (ticket !== feedbackLoads) return;
    $("feedback-body").replaceChildren(...listing.data.map(feedbackRow));
    $("feedback-list-status").textContent = listing.count === 0 ? "No feedback yet." : `${counted(listing.count, "rating")}.`;
    drawPager($("feedback-pager"),
      { offset: feedbackOffset, limit: FEEDBACK_PAGE, count: listing.count, label: "Ratings" },
      (next) => { feedbackOffset = next; loadFeedback(); });
  } catch (error) {
    if (ticket === feedbackLoads) {
      $("feedback-list-status").textContent = describeError(error, "Loading the feedback");
    }
  }
}

async function exportFeedback() {
  try {
    const query = new URLSearchParams({ format: "jsonl" });
    if ($("feedback-rating").value) query.set("rating", $("feedback-rating").value);
    await saveFile(`/feedback?${query}`, "feedback.jsonl");
  } catch (error) {
    $("feedback-list-status").textContent = describeError(error, "The export");
  }
}

export async function openQuality() {
  $("eval-status").textContent = "";
  loadBenchPickers().catch((error) => {
    $("bench-status").textContent = describeError(error, "Loading the collections");
  });
  try {
    await loadSets();
    await loadRuns();
  } catch (error) {
    $("eval-status").textContent = describeError(error, "Loading the evaluations");
  }
  feedbackOffset = 0;
  await loadFeedback();
}

export function resetQuality() {
  polling += 1;
  runs = [];
  $("eval-set").replaceChildren();
  $("eval-runs-body").replaceChildren();
  $("eval-runs-table").hidden = true;
  $("eval-runs-pager").replaceChildren();
  $("eval-chart").replaceChildren();
  $("eval-chart-figure").hidden = true;
  $("eval-failures").hidden = true;
  $("eval-failures-list").replaceChildren();
  $("eval-progress").hidden = true;
  $("eval-status").textContent = "";
  $("feedback-body").replaceChildren();
  $("feedback-pager").replaceChildren();
  feedbackOffset = 0;
  feedbackLoads += 1;
  $("feedback-list-status").textContent = "";
  resetAnswerRecord();
}

export function setUpQuality() {
  $("eval-run").addEventListener("click", startRun);
  $("eval-set").addEventListener("change", () => loadRuns().catch(() => {}));
  $("eval-metric").addEventListener("change", drawChart);
  window.addEventListener("resize", drawChart); // a phone turned: the chart's text keeps its size
  $("eval-feedback-form").addEventListener("submit", setFromFeedback);
  $("eval-upload-form").addEventListener("submit", uploadSet);
  $("feedback-rating").addEventListener("change", () => {
    feedbackOffset = 0;
    loadFeedback();
  });
  $("feedback-export").addEventListener("click", exportFeedback);
  setUpAnswerRecords();
}
