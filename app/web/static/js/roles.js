// Who is signed in and with which role, as the server says (GET /auth/me). The page shows only
// the controls that role may use; the server checks every request anyway (app/api/access.py).

export const ROLES = ["reader", "member", "admin"];

let caller = null; // {user_id, username, role, ...} of this session, or null

export function setCaller(me) {
  caller = me;
  applyRole();
}

export function currentCaller() {
  return caller;
}

export function roleAtLeast(role) {
  return caller !== null && ROLES.indexOf(caller.role) >= ROLES.indexOf(role);
}

// The roles a key of this caller may have (at most the caller's own).
export function rolesUpToMine() {
  return caller === null ? [] : ROLES.slice(0, ROLES.indexOf(caller.role) + 1);
}

// Admins delete any document, members only their own uploads, readers none.
export function mayDeleteDocument(doc) {
  if (roleAtLeast("admin")) return true;
  return roleAtLeast("member") && doc.uploaded_by === caller.user_id;
}

// data-role="member": shown from that role up; data-role-below="member": shown under it only.
// Without a caller (signed out, loading) neither kind shows.
function applyRole() {
  for (const node of document.querySelectorAll("[data-role]")) {
    node.hidden = !roleAtLeast(node.dataset.role);
  }
  for (const node of document.querySelectorAll("[data-role-below]")) {
    node.hidden = caller === null || roleAtLeast(node.dataset.roleBelow);
  }
}
