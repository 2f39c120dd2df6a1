// Activity (admins): the tenant's audit log, newest first, by page, filtered by action and user.

import { everyListed, json } from "./api.js";
import { describeError, drawPager, element, formatTime } from "./format.js";

const $ = (id) => document.getElementById(id);
const PAGE = 50; // under the server's default page-size cap (RAG_MAX_PAGE_SIZE, 100)
const MAX_USER_PAGES = 20; // the user filter lists at most this many pages of users
// The server's list (app/services/audit.py ACTIONS); tests/api/test_web_admin.py compares them.
export const ACTIONS = [
  "login.succeeded", "login.failed", "login.locked", "logout", "logout.everywhere",
  "password.changed",
  "key.created", "key.revoked", "user.created", "user.changed", "user.deleted",
  "document.uploaded", "document.deleted", "document.moved", "document.metadata",
  "collection.created", "collection.changed", "collection.deleted", "collection.access",
  "group.created", "group.changed", "group.deleted", "group.member_added",
  "group.member_removed", "quota.refused",
  "answer.rated", "answers.exported", "answers.deleted",
  "evaluation.set_created", "evaluation.set_deleted", "evaluation.run_started",
  "sso.configured", "sso.removed", "sso.signed_in", "sso.provisioned", "sso.role_changed",
  "sso.refused", "sso.password_refused",
  "webhook.created", "webhook.changed", "webhook.deleted", "webhook.disabled",
];
let offset = 0;
let loads = 0; // only the latest request's answer is drawn (filters change quickly)
let names = new Map(); // user id -> user name, to show names instead of ids

function nameOf(userId) {
  if (!userId) return "—";
  return names.get(userId) || userId;
}

// {"role": "reader", "key_id": "key_..."} -> "role: reader, key_id: key_..."
function details(detail) {
  return Object.entries(detail || {})
    .map(([key, value]) => `${key}: ${typeof value === "object" ? JSON.stringify(value) : value}`)
    .join(", ");
}

function entryRow(entry) {
  return element("tr", { attrs: { "data-entry": String(entry.id) } }, [
    element("td", { className: "when", text: formatTime(entry.at) }),
    element("td", {}, [element("code", { text: entry.action })]),
    element("td", {}, [element("bdi", { text: nameOf(entry.user_id) })]),
    element("td", { className: "name" }, [element("bdi", { text: nameOf(entry.target_id) })]),
    element("td", { text: entry.client_ip || "—" }),
    element("td", { className: "name" }, [element("bdi", { text: details(entry.detail) })]),
  ]);
}

async function refreshActivity() {
  const query = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
  if ($("activity-action").value) query.set("action", $("activity-action").value);
  if ($("activity-user").value) query.set("user_id", $("activity-user").value);
  const status = $("activity-status");
  const ticket = ++loads;
  try {
    const listing = await json(`/audit?${query}`);
    if (ticket !== loads) return;
    $("activity-body").replaceChildren(...listing.data.map(entryRow));
    status.textContent = listing.count === 0 ? "No activity matches." : "";
    drawPager($("activity-pager"), { offset, limit: PAGE, count: listing.count, label: "Entries" },
      (next) => { offset = next; refreshActivity(); });
  } catch (error) {
    if (ticket === loads) status.textContent = describeError(error, "Loading the activity");
  }
}

// The user filter lists the tenant's users; entries show names instead of ids.
async function loadUsers() {
  try {
    const users = await everyListed("/users", { limit: PAGE, maxPages: MAX_USER_PAGES });
    names = new Map(users.map((user) => [user.user_id, user.username]));
    const chosen = $("activity-user").value;
    $("activity-user").replaceChildren(
      element("option", { text: "Anyone", attrs: { value: "" } }),
      ...users.map((user) => element("option", {
        text: user.username, attrs: { value: user.user_id },
      })),
    );
    $("activity-user").value = names.has(chosen) ? chosen : "";
  } catch (error) {
    $("activity-status").textContent = describeError(error, "Loading the users");
  }
}

export async function openActivity() {
  offset = 0;
  await loadUsers();
  await refreshActivity();
}

export function resetActivity() {
  offset = 0;
  names = new Map();
  $("activity-form").reset();
  $("activity-user").replaceChildren(element("option", { text: "Anyone", attrs: { value: "" } }));
  $("activity-body").replaceChildren();
  $("activity-pager").replaceChildren();
  $("activity-status").textContent = "";
}

export function setUpActivity() {
  $("activity-action").append(
    ...ACTIONS.map((action) => element("option", { text: action, attrs: { value: action } })),
  );
  for (const filter of ["activity-action", "activity-user"]) {
    $(filter).addEventListener("change", () => {
      offset = 0;
      refreshActivity();
    });
  }
  $("activity-form").addEventListener("submit", (event) => event.preventDefault());
}
