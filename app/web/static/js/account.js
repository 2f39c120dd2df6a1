// Account: change your password, create API keys (shown once), list and revoke them.

import { ApiError, json, request } from "./api.js";
import { confirmAction } from "./confirm.js";
import { describeError, element, formatTime, jsonBody, smallButton } from "./format.js";
import { rolesUpToMine } from "./roles.js";

const $ = (id) => document.getElementById(id);
let afterPasswordChange = () => {};

// What to do once the password has changed (every session ended: back to the sign-in form).
export function whenPasswordChanged(callback) {
  afterPasswordChange = callback;
}

async function changePassword(event) {
  event.preventDefault();
  const error = $("password-error");
  const current = $("current-password").value;
  const next = $("new-password").value;
  error.textContent = "";
  if (!current || !next) {
    error.textContent = "Enter your current password and a new one.";
    return;
  }
  try {
    await request("/auth/password", { ...jsonBody("POST", {
      current_password: current, new_password: next,
    }), own401: true });
  } catch (failure) {
    if (failure.status === 401) {
      // A wrong current password, or a session that has ended: /auth/me tells them apart
      // (and signs out in the second case).
      try {
        await json("/auth/me");
      } catch {
        return;
      }
      error.textContent = "Your current password is wrong.";
      $("current-password").focus();
    } else if (failure.status === 422) {
      error.textContent = `The new password was refused: ${failure.message}.`;
      $("new-password").focus();
    } else {
      error.textContent = describeError(failure, "Changing the password");
    }
    return;
  }
  afterPasswordChange();
}

// One key's row; `owner` (a name) adds the owner's column and names the button after both.
export function keyRow(key, onRevoke, owner = null) {
  const revoke = smallButton({
    text: "Revoke",
    label: owner === null ? `Revoke ${key.name}` : `Revoke ${key.name} of ${owner}`,
  }, () => onRevoke(key));
  const ownerCell = owner === null ? [] : [element("td", {}, [element("bdi", { text: owner })])];
  return element("tr", { attrs: { "data-key": key.key_id } }, [
    ...ownerCell,
    element("td", { className: "name" }, [element("bdi", { text: key.name })]),
    element("td", {}, [element("code", { text: `${key.prefix}…` })]),
    element("td", { text: key.role }),
    element("td", { text: formatTime(key.created_at) }),
    element("td", { text: key.expires_at ? formatTime(key.expires_at) : "never" }),
    element("td", { text: key.last_used_at ? formatTime(key.last_used_at) : "never" }),
    element("td", {}, [revoke]),
  ]);
}

async function refreshKeys() {
  try {
    const listing = await json("/auth/keys");
    $("keys-body").replaceChildren(...listing.data.map((key) => keyRow(key, revokeKey)));
    $("keys-table").hidden = listing.data.length === 0;
    $("keys-empty").hidden = listing.data.length > 0;
  } catch (error) {
    $("keys-status").textContent = describeError(error, "Loading your keys");
  }
}

// Asks, then revokes; what happened in words for `status` (null: the person said no).
export async function confirmAndRevoke(key) {
  const sure = await confirmAction({
    title: "Revoke API key?",
    text: `“${key.name}” (${key.prefix}…) stops working at once, for every script that uses it.`,
    action: "Revoke",
  });
  if (!sure) return null;
  try {
    await request(`/auth/keys/${encodeURIComponent(key.key_id)}`, { method: "DELETE" });
    return `Revoked “${key.name}”.`;
  } catch (error) {
    return describeError(error, `Revoking “${key.name}”`);
  }
}

async function revokeKey(key) {
  const outcome = await confirmAndRevoke(key);
  if (outcome === null) return;
  $("keys-status").textContent = outcome;
  await refreshKeys();
}

function hideNewKey() {
  $("new-key-value").value = "";
  $("new-key-name").textContent = "";
  $("new-key-status").textContent = "";
  $("new-key").hidden = true;
}

async function createKey(event) {
  event.preventDefault();
  const error = $("key-error");
  const name = $("key-name").value.trim();
  const days = $("key-days").value.trim();
  error.textContent = "";
  if (!name) {
    error.textContent = "Give the key a name (what it is for).";
    $("key-name").focus();
    return;
  }
  const most = Number($("key-days").max); // the server's limit, written on the field
  if (days && !(/^\d+$/.test(days) && Number(days) >= 1 && Number(days) <= most)) {
    error.textContent = `Expiry must be a whole number of days from 1 to ${most}, or empty.`;
    $("key-days").focus();
    return;
  }
  const body = { name, role: $("key-role").value };
  if (days) body.expires_in_days = Number(days);
  let created;
  try {
    created = await json("/auth/keys", jsonBody("POST", body));
  } catch (failure) {
    error.textContent = failure instanceof ApiError && failure.status === 422 ?
      `The key was refused: ${failure.message}.` : describeError(failure, "Creating the key");
    return;
  }
  $("key-form").reset();
  fillKeyRoles();
  $("new-key-name").textContent = created.name;
  $("new-key-value").value = created.key;
  $("new-key-status").textContent = "";
  $("new-key").hidden = false;
  $("new-key-title").focus();
  await refreshKeys();
}

async function copyKey() {
  const field = $("new-key-value");
  try {
    await navigator.clipboard.writeText(field.value);
    $("new-key-status").textContent = "Copied to the clipboard.";
  } catch {
    // No clipboard access (a page over plain HTTP on another host): select it for Ctrl+C.
    field.focus();
    field.select();
    $("new-key-status").textContent = "Copying is not allowed here: the key is selected, press Ctrl+C.";
  }
}

function fillKeyRoles() {
  const roles = rolesUpToMine();
  const mine = roles[roles.length - 1];
  $("key-role").replaceChildren(
    ...roles.map((role) => element("option", {
      text: role === mine ? `${role} (same as yours)` : role,
      attrs: { value: role },
    })),
  );
  $("key-role").value = mine || "";
}

// Opening the Account view: a fresh form and the current list (a new key shown earlier is gone).
export async function openAccount() {
  resetAccount();
  fillKeyRoles();
  await refreshKeys();
}

// Nothing of the last session (above all no key) stays on the page.
export function resetAccount() {
  hideNewKey();
  $("password-form").reset();
  $("key-form").reset();
  for (const id of ["password-error", "key-error", "keys-status"]) $(id).textContent = "";
  $("keys-body").replaceChildren();
  $("keys-table").hidden = true;
  $("keys-empty").hidden = true;
}

export function setUpAccount() {
  $("password-form").addEventListener("submit", changePassword);
  $("key-form").addEventListener("submit", createKey);
  $("new-key-copy").addEventListener("click", copyKey);
  $("new-key-done").addEventListener("click", () => {
    hideNewKey();
    $("key-name").focus();
  });
}
