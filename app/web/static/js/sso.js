// Single sign-on on the sign-in page: "Sign in with <provider>" once the person names their
// organisation (or types an email address whose domain one organisation allows), and the end
// of a sign-in, whose one-time code comes back in the address's fragment (#sso_code=...).

import { apiUrl, signInWithCode, ssoOption } from "./api.js";

const $ = (id) => document.getElementById(id);
const STARTED_KEY = "rag.sso.organisation"; // the organisation a sign-in was started for
let lookups = 0; // only the latest lookup's answer is shown (the fields change quickly)

// Shows or hides the provider button for what the form holds now.
export async function offerSso() {
  const organisation = $("organisation").value.trim().toLowerCase();
  const username = $("username").value.trim();
  const mine = ++lookups;
  let option = null;
  if (organisation) option = await ssoOption({ organisation });
  else if (username.includes("@")) option = await ssoOption({ email: username });
  if (mine !== lookups) return;
  $("sso-offer").hidden = !option;
  if (!option) return;
  $("sso-start").textContent = `Sign in with ${option.provider_name}`;
  $("sso-start").href = apiUrl(option.start_url);
  $("sso-start").dataset.organisation = option.tenant_id;
  $("sso-password-note").hidden = option.password_login;
}

export function setUpSso() {
  $("organisation").addEventListener("change", offerSso);
  $("username").addEventListener("change", offerSso);
  $("sso-start").addEventListener("click", () => {
    try {
      sessionStorage.setItem(STARTED_KEY, $("sso-start").dataset.organisation || "");
    } catch {
      // not remembered: the organisation field just starts empty next time
    }
  });
}

// The one-time code a finished sign-in left in the address, removed from it at once (it must
// not stay in the history), or "" when there is none.
export function takeSsoCode() {
  const found = /^#sso_code=([A-Za-z0-9_-]{1,128})$/.exec(location.hash);
  if (!found) return "";
  history.replaceState(null, "", location.pathname + location.search);
  return found[1];
}

// Trades the code for the service's own token; throws the API's error when it cannot.
export async function finishSso(code) {
  let organisation = "";
  try {
    organisation = sessionStorage.getItem(STARTED_KEY) || "";
    sessionStorage.removeItem(STARTED_KEY);
  } catch {
    // storage blocked: nothing to remember
  }
  await signInWithCode(code, organisation);
}

// After signing out: the provider's own sign-out, when the server offered one.
export function offerProviderSignOut(url) {
  $("sso-end-session").href = url;
  $("sso-end-session-note").hidden = false;
}

export function hideProviderSignOut() {
  $("sso-end-session-note").hidden = true;
}
