// Entry point: the session's states (signed out, loading, signed in) and, signed in, the
// sections of the top bar (Documents & Ask, Account, Collections, for members and admins
// Quality, and for admins Users and Activity).

import { openAccount, resetAccount, setUpAccount, whenPasswordChanged } from "./account.js";
import { openActivity, resetActivity, setUpActivity } from "./activity.js";
import {
  json,
  rememberedOrganisation,
  request,
  signIn,
  signOut,
  token,
  whenUnauthorized,
} from "./api.js";
import { clearAnswer, resetAsk, setUpAsk } from "./ask.js";
import { resetBench, setUpBench } from "./bench.js";
import {
  finishSso,
  hideProviderSignOut,
  offerProviderSignOut,
  offerSso,
  setUpSso,
  takeSsoCode,
} from "./sso.js";
import {
  openCollectionsView,
  resetCollectionsView,
  setUpCollectionsView,
} from "./collection-admin.js";
import { loadCollections, resetCollections } from "./collections.js";
import { setUpDocumentDetails } from "./document-details.js";
import { drawDocuments, refreshList, resetDocuments, setUpDocuments } from "./documents.js";
import { openQuality, resetQuality, setUpQuality } from "./evaluation.js";
import { setUpFeedback } from "./feedback.js";
import { resetFilters, setUpFilters } from "./filters.js";
import { describeError, waitWords } from "./format.js";
import { roleAtLeast, setCaller } from "./roles.js";
import { openUsers, resetUsers, setUpUsers, whenOwnAccountChanged } from "./users.js";
import { closeViewer, setUpViewer } from "./viewer.js";
import { currentView, showView } from "./views.js";

const $ = (id) => document.getElementById(id);
const SESSION_ENDED = "Your session has ended; sign in again.";
const PASSWORD_CHANGED = "Your password has changed; sign in with the new one.";
// Each section: what loads it, where focus goes, and the least role that may open it.
const SECTIONS = {
  documents: {
    open: () => Promise.all([refreshList(), loadCollections()]),
    focus: "documents-title",
    role: "reader",
  },
  collections: { open: openCollectionsView, focus: "collections-title", role: "reader" },
  quality: { open: openQuality, focus: "bench-title", role: "member" },
  account: { open: openAccount, focus: "password-title", role: "reader" },
  users: { open: openUsers, focus: "users-title", role: "admin" },
  activity: { open: openActivity, focus: "activity-title", role: "admin" },
};

// Nothing of one session stays on the page for the next (another person may sign in here).
function clearPanels() {
  closeViewer();
  resetDocuments();
  resetCollections();
  resetCollectionsView();
  resetFilters();
  resetAsk();
  resetBench();
  resetQuality();
  resetAccount();
  resetUsers();
  resetActivity();
  setCaller(null);
  $("session-user").textContent = "";
  $("signed-in").title = "";
  $("session-role").textContent = "";
}

// The section the address names (#account), if the caller's role may open it.
function sectionFromAddress() {
  const name = location.hash.slice(1);
  return Object.hasOwn(SECTIONS, name) && roleAtLeast(SECTIONS[name].role) ? name : "documents";
}

// Shows one section and loads its data; `focus` moves the keyboard to its heading.
async function openSection(name, { load = true, focus = true } = {}) {
  const section = SECTIONS[name];
  if (name !== "account") resetAccount(); // a new key is shown once: gone when you leave
  // The address names the section shown (an admin's #users after losing the role, say).
  if (location.hash && location.hash !== `#${name}`) {
    history.replaceState(null, "", `${location.pathname}${location.search}#${name}`);
  }
  showView(name);
  if (load) await section.open(); // a 401 here signs out through whenUnauthorized
  if (focus && currentView() === name) $(section.focus).focus();
}

// Who is signed in, with which role, as the server says; false once the session is over.
async function loadCaller() {
  const [me] = await Promise.allSettled([json("/auth/me"), refreshList(), loadCollections()]);
  if (!token()) return false; // a 401 signed out already
  if (me.status === "rejected") {
    enterSignIn(describeError(me.reason, "Loading your account"));
    return false;
  }
  setCaller(me.value);
  $("session-user").textContent = me.value.username;
  $("signed-in").title = `Signed in as ${me.value.username}`; // the whole name, if cut short
  $("session-role").textContent = me.value.role;
  drawDocuments(); // with the controls this role may use
  return true;
}

// Signed in (or a stored token): the app appears once the server has accepted the token, so an
// expired or tampered one goes straight back to the sign-in form.
async function enterApp() {
  clearPanels();
  showView("loading");
  if (!(await loadCaller())) return;
  const name = sectionFromAddress();
  if (name === "documents") {
    showView("documents");
    $("question").focus();
  } else {
    await openSection(name);
  }
}

// `message` says why the form is back; a plain sign-out is news, not an error.
function enterSignIn(message = "", { isError = true } = {}) {
  signOut();
  clearPanels();
  // The next person starts on Documents & Ask, not on the last one's section.
  if (location.hash) history.replaceState(null, "", location.pathname + location.search);
  $("login-error").textContent = message;
  $("login-error").classList.toggle("notice", !isError);
  showView("signed-out");
  hideProviderSignOut();
  $("organisation").value = rememberedOrganisation();
  offerSso();
  $("username").focus();
}

// Back from the organisation's provider with a one-time code: trade it, then enter the app.
async function enterFromProvider(code) {
  showView("loading");
  try {
    await finishSso(code);
  } catch (error) {
    const expired = "That sign-in has expired or was already used: sign in again.";
    enterSignIn(error.status === 401 ? expired : describeError(error, "Signing in"));
    return;
  }
  await enterApp();
}

function setUpNavigation() {
  for (const link of document.querySelectorAll("[data-section]")) {
    // The address's fragment changes (Back works); hashchange opens the section. Set here
    // rather than followed, since the page's <base> may not be the page itself.
    link.addEventListener("click", (event) => {
      event.preventDefault();
      if (location.hash === `#${link.dataset.section}`) openSection(link.dataset.section);
      else location.hash = link.dataset.section;
    });
  }
  window.addEventListener("hashchange", () => {
    if (currentView() === "signed-out" || currentView() === "loading") return;
    openSection(sectionFromAddress());
  });
  // An admin who changed their own account may have lost the role: ask the server again.
  whenOwnAccountChanged(async () => {
    if (await loadCaller()) openSection(sectionFromAddress());
  });
  whenPasswordChanged(() => enterSignIn(PASSWORD_CHANGED, { isError: false }));
}

function signInProblem(error, organisation) {
  if (error.status === 401) {
    return organisation
      ? "Wrong organisation, user name or password."
      : "Wrong user name or password.";
  }
  if (error.status === 429) {
    const when = error.retryAfter ? `in ${waitWords(error.retryAfter)}` : "later";
    return `Too many sign-in attempts: try again ${when}.`;
  }
  if (error.code === "tenant_required") {
    return "Your user name is used in more than one organisation: enter your organisation.";
  }
  return describeError(error, "Signing in");
}

function setUpLogin() {
  $("organisation").value = rememberedOrganisation();
  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const organisation = $("organisation").value.trim().toLowerCase();
    const username = $("username").value.trim();
    const password = $("password").value;
    $("login-error").classList.remove("notice");
    if (!username || !password) {
      $("login-error").textContent = "Enter your user name and password.";
      return;
    }
    try {
      await signIn(username, password, organisation);
    } catch (error) {
      $("login-error").textContent = signInProblem(error, organisation);
      if (error.code === "tenant_required") $("organisation").focus();
      return;
    }
    $("password").value = "";
    $("login-error").textContent = "";
    await enterApp();
  });
  $("sign-out").addEventListener("click", () => {
    // The server revokes the token too (a copied one stops working); the request is sent
    // with the token before enterSignIn forgets it here.
    request("/auth/logout", { method: "POST" })
      .then(async (response) => {
        if (response.status !== 200) return;
        const body = await response.json();
        if (body.end_session_url) offerProviderSignOut(body.end_session_url);
      })
      .catch(() => {});
    enterSignIn("You are signed out.", { isError: false });
  });
  // Any 401 ends the session; on the sign-in form already, its message stays.
  whenUnauthorized(() => {
    if (currentView() !== "signed-out") enterSignIn(SESSION_ENDED);
  });
}

setUpLogin();
setUpNavigation();
setUpDocuments();
setUpAsk();
setUpFilters({ clearAnswer });
setUpDocumentDetails();
setUpCollectionsView();
setUpFeedback();
setUpBench();
setUpQuality();
setUpViewer();
setUpAccount();
setUpUsers();
setUpActivity();
setUpSso();
const ssoCode = takeSsoCode();
if (ssoCode) enterFromProvider(ssoCode);
else if (token()) enterApp();
else enterSignIn();
