// Users (admins): add a user, change a role, disable or enable, delete.

import { confirmAndRevoke, keyRow } from "./account.js";
import { json, request } from "./api.js";
import { confirmAction } from "./confirm.js";
import { describeError, drawPager, element, formatTime, jsonBody, smallButton } from "./format.js";
import { currentCaller, ROLES } from "./roles.js";

const $ = (id) => document.getElementById(id);
const PAGE = 50;
let offset = 0;
let afterOwnChange = () => {};

// What to do after an admin changed their own account (their role may have dropped).
export function whenOwnAccountChanged(callback) {
  afterOwnChange = callback;
}

// The server's words for a refused change (the last enabled admin: 409), as an error.
function refused(error, subject) {
  if (error.status === 409 || error.status === 422) return `${subject}: ${error.message}.`;
  return describeError(error, subject);
}

function report(text, { isError = false } = {}) {
  $("users-error").textContent = isError ? text : "";
  $("users-status").textContent = isError ? "" : text;
}

async function change(user, patch, done) {
  const path = `/users/${encodeURIComponent(user.user_id)}`;
  try {
    report(done(await json(path, jsonBody("PATCH", patch))));
  } catch (error) {
    report(refused(error, `Could not change ${user.username}`), { isError: true });
    await refreshUsers();
    return;
  }
  if (currentCaller()?.user_id === user.user_id) await afterOwnChange();
  else await refreshUsers();
}

async function remove(user) {
  const sure = await confirmAction({
    title: "Delete user?",
    text: `${user.username} will no longer be able to sign in, and their API keys stop ` +
      "working. Their documents stay.",
    action: "Delete",
  });
  if (!sure) return;
  try {
    await request(`/users/${encodeURIComponent(user.user_id)}`, { method: "DELETE" });
    report(`Deleted ${user.username}.`);
  } catch (error) {
    report(refused(error, `Could not delete ${user.username}`), { isError: true });
  }
  await refreshUsers();
}

function userRow(user) {
  const label = `Role of ${user.username}`;
  const role = element("select", { attrs: { "aria-label": label } },
    ROLES.map((name) => element("option", { text: name, attrs: { value: name } })));
  role.value = user.role;
  role.addEventListener("change", () => change(user, { role: role.value },
    (changed) => `${changed.username} is now ${changed.role}.`));
  const verb = user.disabled ? "Enable" : "Disable";
  const toggle = smallButton({ text: verb, label: `${verb} ${user.username}` },
    () => change(user, { disabled: !user.disabled },
      (changed) => `${changed.username} is ${changed.disabled ? "disabled: signed out " +
        "everywhere, API keys deleted" : "enabled again"}.`));
  const del = smallButton(
    { text: "Delete", label: `Delete ${user.username}`, danger: true }, () => remove(user));
  const name = element("td", { className: "name" }, [element("bdi", { text: user.username })]);
  return element("tr", { attrs: { "data-user": user.user_id } }, [
    name,
    element("td", {}, [role]),
    element("td", {}, [element("span", {
      className: `badge ${user.disabled ? "failed" : "done"}`,
      text: user.disabled ? "disabled" : "enabled",
    })]),
    element("td", { text: formatTime(user.created_at) }),
    element("td", { className: "actions" }, [toggle, del]),
  ]);
}

async function refreshUsers() {
  try {
    const listing = await json(`/users?limit=${PAGE}&offset=${offset}`);
    if (listing.data.length === 0 && offset > 0) { // the last one on this page went away
      offset = Math.max(0, offset - PAGE);
      await refreshUsers();
      return;
    }
    $("users-body").replaceChildren(...listing.data.map(userRow));
    await refreshTenantKeys(listing.data);
    drawPager($("users-pager"), { offset, limit: PAGE, count: listing.count, label: "Users" },
      (next) => { offset = next; refreshUsers(); });
  } catch (error) {
    report(describeError(error, "Loading the users"), { isError: true });
  }
}

// Every key of the tenant (GET /auth/keys?all=true), with its owner's name.
async function refreshTenantKeys(users) {
  const owners = new Map(users.map((user) => [user.user_id, user.username]));
  try {
    const listing = await json("/auth/keys?all=true");
    const revoke = async (key) => {
      const outcome = await confirmAndRevoke(key);
      if (outcome === null) return;
      $("tenant-keys-status").textContent = outcome;
      await refreshUsers();
    };
    $("tenant-keys-body").replaceChildren(...listing.data.map(
      (key) => keyRow(key, revoke, owners.get(key.user_id) || key.user_id),
    ));
    $("tenant-keys-table").hidden = listing.data.length === 0;
    $("tenant-keys-empty").hidden = listing.data.length > 0;
  } catch (error) {
    $("tenant-keys-status").textContent = describeError(error, "Loading the keys");
  }
}

async function addUser(event) {
  event.preventDefault();
  const username = $("new-user-name").value.trim();
  const password = $("new-user-password").value;
  const role = $("new-user-role").value;
  if (!username || !password) {
    report("Enter a user name and an initial password.", { isError: true });
    (username ? $("new-user-password") : $("new-user-name")).focus();
    return;
  }
  try {
    const user = await json("/users", jsonBody("POST", { username, password, role }));
    report(`Added ${user.username} (${user.role}).`);
    $("user-form").reset();
    $("new-user-name").focus();
  } catch (error) {
    report(refused(error, `Could not add ${username}`), { isError: true });
    return;
  }
  await refreshUsers();
}

export async function openUsers() {
  resetUsers();
  await refreshUsers();
}

export function resetUsers() {
  offset = 0;
  $("user-form").reset();
  report("");
  $("users-body").replaceChildren();
  $("users-pager").replaceChildren();
  $("tenant-keys-body").replaceChildren();
  $("tenant-keys-status").textContent = "";
  $("tenant-keys-table").hidden = true;
  $("tenant-keys-empty").hidden = true;
}

export function setUpUsers() {
  $("user-form").addEventListener("submit", addUser);
}
