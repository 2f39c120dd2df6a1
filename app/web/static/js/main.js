// Entry point: the session's states (signed out, loading, signed in) and the panels they show.

import { currentUser, request, signIn, signOut, token, whenUnauthorized } from "./api.js";
import { resetAsk, setUpAsk } from "./ask.js";
import { refreshList, resetDocuments, setUpDocuments } from "./documents.js";
import { describeError } from "./format.js";
import { closeViewer, setUpViewer } from "./viewer.js";
import { currentView, showView } from "./views.js";

const $ = (id) => document.getElementById(id);
const SESSION_ENDED = "Your session has ended; sign in again.";

// Nothing of one session stays on the page for the next (another person may sign in here).
function clearPanels() {
  closeViewer();
  resetDocuments();
  resetAsk();
  $("session-user").textContent = "";
}

// Signed in (or a stored token): the app appears once the server has accepted the token, so an
// expired or tampered one goes straight back to the sign-in form.
async function enterApp() {
  clearPanels();
  showView("loading");
  await refreshList(); // a 401 here signs out through whenUnauthorized
  if (!token()) return;
  $("session-user").textContent = currentUser();
  showView("signed-in");
  $("question").focus();
}

// `message` says why the form is back; a plain sign-out is news, not an error.
function enterSignIn(message = "", { isError = true } = {}) {
  signOut();
  clearPanels();
  $("login-error").textContent = message;
  $("login-error").classList.toggle("notice", !isError);
  showView("signed-out");
  $("username").focus();
}

function setUpLogin() {
  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const username = $("username").value.trim();
    const password = $("password").value;
    $("login-error").classList.remove("notice");
    if (!username || !password) {
      $("login-error").textContent = "Enter your user name and password.";
      return;
    }
    try {
      await signIn(username, password);
    } catch (error) {
      $("login-error").textContent =
        error.status === 401 ? "Wrong user name or password." : describeError(error, "Signing in");
      return;
    }
    $("password").value = "";
    $("login-error").textContent = "";
    await enterApp();
  });
  $("sign-out").addEventListener("click", () => {
    // The server revokes the token too (a copied one stops working); the request is sent
    // with the token before enterSignIn forgets it here.
    request("/auth/logout", { method: "POST" }).catch(() => {});
    enterSignIn("You are signed out.", { isError: false });
  });
  // Any 401 ends the session; on the sign-in form already, its message stays.
  whenUnauthorized(() => {
    if (currentView() !== "signed-out") enterSignIn(SESSION_ENDED);
  });
}

setUpLogin();
setUpDocuments();
setUpAsk();
setUpViewer();
if (token()) enterApp();
else enterSignIn();
