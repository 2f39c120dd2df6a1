// Who has access to a managed collection: its grants to groups and users (read, write, manage),
// changed by replacing the whole list (PUT /collections/{id}/access). Admins see names; another
// manager, who may not list users or groups, sees ids (and their own name) and names a group by
// its name.

import { json } from "./api.js";
import { describeError, element, jsonBody, smallButton } from "./format.js";
import { groupName, knownGroups, knownUsers, userName } from "./groups.js";
import { refused } from "./refused.js";
import { currentCaller } from "./roles.js";

const $ = (id) => document.getElementById(id);
const PERMISSIONS = ["read", "write", "manage"];
let shown = null; // {collection, grants} of the panel, or null
let loads = 0;

function report(text, { isError = false } = {}) {
  $("grants-error").textContent = isError ? text : "";
  $("grants-status").textContent = isError ? "" : text;
}

const accessPath = (collection) =>
  `/collections/${encodeURIComponent(collection.collection_id)}/access`;

function holderName(grant) {
  if (grant.group_id) return `group ${groupName(grant.group_id) || grant.group_id}`;
  const me = currentCaller();
  const own = me && me.user_id === grant.user_id ? me.username : "";
  return `user ${userName(grant.user_id) || own || grant.user_id}`;
}

function summary(collection) {
  return collection.visibility === "tenant"
    ? "Everyone in the organisation reads it, and members add documents and change their own " +
      "uploads. The access below adds to that."
    : "Only admins and the groups and users below may read it.";
}

// Replaces the grants; `done` words the change for the status line.
async function putGrants(grants, done, subject) {
  if (!shown) return;
  const { collection } = shown;
  try {
    const stored = await json(accessPath(collection), jsonBody("PUT", { grants }));
    if (shown?.collection.collection_id !== collection.collection_id) return;
    shown.grants = stored.grants;
    report(done);
  } catch (error) {
    report(refused(error, subject), { isError: true });
  }
  drawGrants();
}

const bare = (grant) => grant.group_id
  ? { group_id: grant.group_id, permission: grant.permission }
  : { user_id: grant.user_id, permission: grant.permission };

function grantRow(grant, index) {
  const name = holderName(grant);
  const picker = element("select", { attrs: { "aria-label": `Access of ${name}` } },
    PERMISSIONS.map((p) => element("option", { text: p, attrs: { value: p } })));
  picker.value = grant.permission;
  picker.addEventListener("change", () => {
    const grants = shown.grants.map(bare);
    grants[index].permission = picker.value;
    putGrants(grants, `The ${name} now has ${picker.value} access.`, `Changing ${name}`);
  });
  const label = `Remove access of ${name}`;
  const remove = smallButton({ text: "Remove", label, danger: true }, () => {
    const grants = shown.grants.map(bare).filter((_, i) => i !== index);
    putGrants(grants, `The ${name} no longer has access of its own.`, `Removing ${name}`);
  });
  return element("tr", {}, [
    element("td", {}, [element("bdi", { text: name })]),
    element("td", {}, [picker]),
    element("td", { className: "actions" }, [remove]),
  ]);
}

function drawGrants() {
  const grants = shown ? shown.grants : [];
  $("grants-body").replaceChildren(...grants.map(grantRow));
  $("grants-table").hidden = grants.length === 0;
  $("grants-empty").hidden = grants.length > 0;
  drawHolderChoices();
}

// Suggestions for "Its name": the tenant's groups or users (admins; others type a group's name).
function drawHolderChoices() {
  const names = $("grant-kind").value === "group"
    ? knownGroups().map((g) => g.name)
    : knownUsers().map((u) => u.username);
  $("grant-holders").replaceChildren(
    ...names.map((name) => element("option", { attrs: { value: name } })));
}

// The grant the form describes, or a sentence saying what is missing.
function grantFromForm() {
  const kind = $("grant-kind").value;
  const typed = $("grant-holder").value.trim();
  const permission = $("grant-permission").value;
  if (!typed) return "Enter the name of the group or user to give access to.";
  if (kind === "group") {
    const group = knownGroups().find((g) => g.name === typed || g.group_id === typed);
    return { group_id: group ? group.group_id : typed, permission };
  }
  const user = knownUsers().find((u) => u.username === typed || u.user_id === typed);
  return { user_id: user ? user.user_id : typed, permission };
}

async function giveAccess(event) {
  event.preventDefault();
  if (!shown) return;
  const grant = grantFromForm();
  if (typeof grant === "string") {
    report(grant, { isError: true });
    $("grant-holder").focus();
    return;
  }
  const typed = $("grant-holder").value.trim();
  const kind = $("grant-kind").value;
  const same = (g) => (grant.group_id && g.group_id === grant.group_id) ||
    (grant.user_id && g.user_id === grant.user_id);
  const grants = shown.grants.filter((g) => !same(g)).map(bare);
  grants.push(grant);
  await putGrants(grants, `The ${kind} ${typed} now has ${grant.permission} access.`,
    `Giving access to ${typed}`);
  if (!$("grants-error").textContent) $("grant-holder").value = "";
}

// Shows the access of a collection the caller manages.
export async function showAccess(collection) {
  const ticket = ++loads;
  shown = { collection, grants: [] };
  $("grants-summary").textContent = summary(collection);
  report("");
  drawGrants();
  try {
    const access = await json(accessPath(collection));
    if (ticket !== loads) return;
    shown.grants = access.grants;
    drawGrants();
  } catch (error) {
    if (ticket === loads) report(describeError(error, "Loading who has access"), { isError: true });
  }
}

export function closeAccess() {
  loads += 1;
  shown = null;
  $("grant-form").reset();
  report("");
  drawGrants();
}

export function setUpGrants() {
  $("grant-form").addEventListener("submit", giveAccess);
  $("grant-kind").addEventListener("change", drawHolderChoices);
}
