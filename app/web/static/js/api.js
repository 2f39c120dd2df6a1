// Talking to the API: the bearer token (sessionStorage, this tab only) and the error envelope.

const TOKEN_KEY = "rag.token";

export class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

let onUnauthorized = () => {};

// API paths are written from the root ("/documents"); they resolve against the page's <base>,
// which the server sets to its path prefix when it runs behind a gateway (RAG_ROOT_PATH).
export function apiUrl(path) {
  return new URL(path.replace(/^\//, ""), document.baseURI).toString();
}

export function whenUnauthorized(callback) {
  onUnauthorized = callback;
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
}

async function errorFrom(response) {
  let code = "error";
  let message = `the server answered ${response.status}`;
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch {
    // not JSON (a proxy's page): keep the status line
  }
  const retryAfter = Number(response.headers.get("Retry-After")) || 0;
  return new ApiError(response.status, code, message, retryAfter);
}

// The token, or null once the app has been told the session is over (nothing may be sent).
export function sessionToken() {
  const bearer = token();
  if (!bearer) onUnauthorized(new ApiError(401, "unauthorized", "not signed in", 0));
  return bearer;
}

// fetch() with the token; throws ApiError for any non-2xx answer. Every call here needs a
// token: without one nothing is sent, and a 401 (expired, revoked or tampered token) signs out,
// unless `own401` says the caller reads that 401 itself (a wrong current password is a 401
// too; the caller then checks the session with another request).
export async function request(path, { own401 = false, ...options } = {}) {
  const bearer = sessionToken();
  if (!bearer) throw new ApiError(401, "unauthorized", "not signed in", 0);
  const headers = new Headers(options.headers || {});
  headers.set("Authorization", `Bearer ${bearer}`);
  const response = await fetch(apiUrl(path), { ...options, headers });
  if (!response.ok) {
    const error = await errorFrom(response);
    // Only the session that sent it ends: a late answer to a previous session's call must
    // not sign out whoever signed in since.
    if (response.status === 401 && !own401 && token() === bearer) {
      signOut();
      onUnauthorized(error);
    }
    throw error;
  }
  return response;
}

// JSON body as an object, or null for 204.
export async function json(path, options = {}) {
  const response = await request(path, options);
  return response.status === 204 ? null : response.json();
}

// Every item of a paged listing (`{ data, count }`), a page at a time from the start, for at
// most `maxPages` pages (the server may cap `limit` lower: each page starts where the last ended).
export async function everyListed(path, { limit = 100, maxPages = Infinity } = {}) {
  const found = [];
  const join = path.includes("?") ? "&" : "?";
  for (let page = 0; page < maxPages; page += 1) {
    const listing = await json(`${path}${join}limit=${limit}&offset=${found.length}`);
    found.push(...listing.data);
    if (!listing.data.length || found.length >= listing.count) break;
  }
  return found;
}

// Saves what `path` answers as a file named `filename` (an export), through the browser's
// download; the object URL is freed once the download has had time to take it.
export async function saveFile(path, filename) {
  const response = await request(path);
  const link = document.createElement("a");
  link.href = URL.createObjectURL(await response.blob());
  link.download = filename;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
}

// The organisation (tenant id) is remembered on this device, across tabs and restarts: it is
// not a secret, and people should not have to type it at every sign-in.
const ORGANISATION_KEY = "rag.organisation";

export function rememberedOrganisation() {
  try {
    return localStorage.getItem(ORGANISATION_KEY) || "";
  } catch {
    return ""; // storage blocked (private mode, policy): the field just starts empty
  }
}

function rememberOrganisation(organisation) {
  try {
    if (organisation) localStorage.setItem(ORGANISATION_KEY, organisation);
    else localStorage.removeItem(ORGANISATION_KEY);
  } catch {
    // Not remembered; signing in still works.
  }
}

// `organisation` may be empty: a user name only one organisation has needs none.
export async function signIn(username, password, organisation = "") {
  const fields = { username, password };
  if (organisation) fields.tenant = organisation;
  const response = await fetch(apiUrl("/auth/token"), {
    method: "POST",
    body: new URLSearchParams(fields),
  });
  if (!response.ok) throw await errorFrom(response);
  const issued = await response.json();
  sessionStorage.setItem(TOKEN_KEY, issued.access_token);
  rememberOrganisation(organisation);
}

// The end of a single sign-on: the one-time code from the address's fragment, traded once for
// the service's own token (the same body /auth/token answers).
export async function signInWithCode(code, organisation = "") {
  const response = await fetch(apiUrl("/auth/sso/exchange"), {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ code }),
  });
  if (!response.ok) throw await errorFrom(response);
  const issued = await response.json();
  sessionStorage.setItem(TOKEN_KEY, issued.access_token);
  if (organisation) rememberOrganisation(organisation);
}

// The provider an organisation (or an email address's domain) signs in with, or null.
export async function ssoOption({ organisation = "", email = "" }) {
  const query = organisation ? { organisation } : { email };
  const response = await fetch(apiUrl(`/auth/sso/options?${new URLSearchParams(query)}`));
  if (!response.ok) return null;
  return response.json();
}
