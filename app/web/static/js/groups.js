// Groups (admins): make one, add and remove its members, delete it. Also the tenant's users and
// groups by name, which the access panel shows instead of ids.

import { everyListed, json, request } from "./api.js";
import { confirmAction } from "./confirm.js";
import { describeError, element, jsonBody, smallButton } from "./format.js";
import { refused } from "./refused.js";
import { roleAtLeast } from "./roles.js";

const $ = (id) => document.getElementById(id);
const MAX_USER_PAGES = 100; // pages of 100 users at most
let users = []; // [{user_id, username, ...}] (admins only; empty for anyone else)
let groups = []; // [{group_id, name, description, members: [user ids]}]
let afterChange = () => {};

// What to redraw after a group changed (the access panel names groups).
export function whenGroupsChanged(callback) {
  afterChange = callback;
}

export function knownUsers() {
  return users;
}

export function knownGroups() {
  return groups;
}

// A user's or group's name for an id ("" when this caller cannot know it).
export function userName(userId) {
  return users.find((u) => u.user_id === userId)?.username || "";
}

export function groupName(groupId) {
  return groups.find((g) => g.group_id === groupId)?.name || "";
}

function report(text, { isError = false } = {}) {
  $("groups-error").textContent = isError ? text : "";
  $("groups-status").textContent = isError ? "" : text;
}

// Users and groups by name (GET /users and GET /groups are for admins: nobody else asks).
export async function loadDirectory() {
  if (!roleAtLeast("admin")) {
    users = [];
    groups = [];
    return;
  }
  const [userList, groupList] = await Promise.all([
    everyListed("/users", { maxPages: MAX_USER_PAGES }), json("/groups"),
  ]);
  users = userList;
  groups = groupList.data;
}

async function change(action, done, subject) {
  try {
    await action();
    report(done);
  } catch (error) {
    report(refused(error, subject), { isError: true });
  }
  await refreshGroups();
  afterChange();
}

function memberItem(group, userId) {
  const name = userName(userId) || userId;
  const remove = smallButton({ text: "Remove", label: `Remove ${name} from ${group.name}` },
    () => change(
      () => request(memberPath(group, userId), { method: "DELETE" }),
      `Removed ${name} from ${group.name}.`,
      `Removing ${name}`,
    ));
  return element("li", {}, [element("bdi", { text: name }), document.createTextNode(" "), remove]);
}

function memberPath(group, userId) {
  return `/groups/${encodeURIComponent(group.group_id)}/members/${encodeURIComponent(userId)}`;
}

function addMemberControls(group) {
  const candidates = users.filter((u) => !group.members.includes(u.user_id));
  const picker = element("select", { attrs: { "aria-label": `New member of ${group.name}` } },
    candidates.map((u) => element("option", { text: u.username, attrs: { value: u.user_id } })));
  const add = smallButton({ text: "Add", label: `Add to ${group.name}` }, () => {
    const name = userName(picker.value);
    change(
      () => request(memberPath(group, picker.value), { method: "PUT" }),
      `Added ${name} to ${group.name}.`,
      `Adding ${name}`,
    );
  });
  add.disabled = candidates.length === 0;
  return element("td", { className: "actions" }, [picker, document.createTextNode(" "), add]);
}

async function removeGroup(group) {
  const sure = await confirmAction({
    title: "Delete group?",
    text: `“${group.name}” and every access given to it go; its members keep the access given ` +
      "to them by name or by other groups.",
    action: "Delete",
  });
  if (!sure) return;
  await change(
    () => request(`/groups/${encodeURIComponent(group.group_id)}`, { method: "DELETE" }),
    `Deleted the group ${group.name}.`,
    `Deleting ${group.name}`,
  );
}

// The name cell becomes a small form: the new name, saved with Enter or Save.
function startRename(group, cell) {
  const input = element("input", {
    attrs: { "aria-label": `New name of ${group.name}`, maxlength: "64", autocomplete: "off" },
  });
  input.value = group.name;
  const save = element("button", {
    text: "Save",
    className: "small",
    attrs: { type: "submit", "aria-label": `Save the name of ${group.name}` },
  });
  const form = element("form", { className: "rename", attrs: { novalidate: "" } }, [input, save]);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const name = input.value.trim();
    if (name === group.name) {
      drawGroups();
      return;
    }
    change(
      () => json(`/groups/${encodeURIComponent(group.group_id)}`, jsonBody("PATCH", { name })),
      `Renamed the group ${group.name} to ${name}.`,
      `Renaming ${group.name}`,
    );
  });
  cell.replaceChildren(form);
  input.focus();
  input.select();
}

function groupRow(group) {
  const members = group.members.length
    ? element("ul", { className: "members" }, group.members.map((id) => memberItem(group, id)))
    : element("span", { className: "hint", text: "No members" });
  const del = smallButton({ text: "Delete", label: `Delete group ${group.name}`, danger: true },
    () => removeGroup(group));
  const name = element("td", { className: "name" }, [
    element("bdi", { text: group.name }),
    ...(group.description ? [element("div", { className: "hint", text: group.description })] : []),
  ]);
  const rename = smallButton({ text: "Rename", label: `Rename group ${group.name}` },
    () => startRename(group, name));
  return element("tr", { attrs: { "data-group": group.group_id } }, [
    name,
    element("td", {}, [members]),
    addMemberControls(group),
    element("td", { className: "actions" }, [rename, del]),
  ]);
}

function drawGroups() {
  $("groups-body").replaceChildren(...groups.map(groupRow));
  $("groups-table").hidden = groups.length === 0;
  $("groups-empty").hidden = groups.length > 0;
}

// Reloads users and groups, then the table.
export async function refreshGroups() {
  if (!roleAtLeast("admin")) return;
  try {
    await loadDirectory();
    drawGroups();
  } catch (error) {
    report(describeError(error, "Loading the groups"), { isError: true });
  }
}

async function addGroup(event) {
  event.preventDefault();
  const name = $("new-group-name").value.trim();
  const description = $("new-group-description").value.trim();
  if (!name) {
    report("Enter a name for the group.", { isError: true });
    $("new-group-name").focus();
    return;
  }
  try {
    await json("/groups", jsonBody("POST", { name, description }));
  } catch (error) {
    report(refused(error, `Creating the group “${name}”`), { isError: true });
    return;
  }
  $("group-form").reset();
  report(`Created the group ${name}.`);
  await refreshGroups();
  afterChange();
}

export function resetGroups() {
  users = [];
  groups = [];
  $("group-form").reset();
  report("");
  $("groups-body").replaceChildren();
  $("groups-empty").hidden = true;
}

export function setUpGroups() {
  $("group-form").addEventListener("submit", addGroup);
}
