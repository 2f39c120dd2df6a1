// Entry point: sign-in, then the documents and ask panels.

import { currentUser, request, signIn, signOut, token, whenUnauthorized } from "./api.js";
import { setUpAsk } from "./ask.js";
import { refreshList, setUpDocuments } from "./documents.js";
import { describeError } from "./format.js";
import { setUpViewer } from "./viewer.js";

const $ = (id) => document.getElementById(id);

function showApp() {
  $("login-view").hidden = true;
  $("app-view").hidden = false;
  $("session").hidden = false;
  $("session-user").textContent = currentUser();
  refreshList();
  $("question").focus();
}

function showLogin(message = "") {
  $("app-view").hidden = true;
  $("session").hidden = true;
  $("login-view").hidden = false;
  $("login-error").textContent = message;
  $("username").focus();
}

function setUpLogin() {
  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const username = $("username").value.trim();
    const password = $("password").value;
    if (!username || !password) {
      $("login-error").textContent = "Enter your user name and password.";
      return;
    }
    try {
      await signIn(username, password);
      $("password").value = "";
      $("login-error").textContent = "";
      showApp();
    } catch (error) {
      $("login-error").textContent =
        error.status === 401 ? "Wrong user name or password." : describeError(error, "Signing in");
    }
  });
  $("sign-out").addEventListener("click", () => {
    // The server revokes the token too (a copied one stops working); the request is sent
    // with the token before it is forgotten here.
    request("/auth/logout", { method: "POST" }).catch(() => {});
    signOut();
    showLogin("You are signed out.");
  });
  whenUnauthorized(() => showLogin("Your session has expired; sign in again."));
}

setUpLogin();
setUpDocuments();
setUpAsk();
setUpViewer();
if (token()) showApp();
else showLogin();
