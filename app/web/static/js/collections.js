// The collection pickers: which collection an upload goes to (those the caller may write), and
// which collections a question may read (all the caller reads, or one of them).

import { json } from "./api.js";

const $ = (id) => document.getElementById(id);
const WRITES = new Set(["write", "manage"]);
let known = []; // the last GET /collections: what the caller reads, with its permission on each

function option(value, label) {
  const item = document.createElement("option");
  item.value = value;
  item.textContent = label;
  return item;
}

// Fills both pickers from GET /collections (the collections the caller reads).
export async function loadCollections() {
  const { data } = await json("/collections");
  known = data;
  const upload = $("upload-collection");
  const ask = $("ask-collection");
  const chosenUpload = upload.value || "general";
  const chosenAsk = ask.value;
  const writable = data.filter((c) => WRITES.has(c.permission));
  upload.replaceChildren(...writable.map((c) => option(c.collection_id, c.name)));
  upload.value = writable.some((c) => c.collection_id === chosenUpload)
    ? chosenUpload
    : (writable[0]?.collection_id ?? "");
  $("upload-collection-field").hidden = writable.length < 2;
  ask.replaceChildren(
    option("", "Every collection I can read"),
    ...data.map((c) => option(c.collection_id, `${c.name} (${c.documents})`)),
  );
  ask.value = data.some((c) => c.collection_id === chosenAsk) ? chosenAsk : "";
  $("ask-collection-field").hidden = data.length < 2;
}

// The collection id an upload goes to ("" when the picker is empty: the server's default).
export function uploadCollection() {
  return $("upload-collection").value;
}

// What a question may read: a list of one collection id, or null for everything readable.
export function askCollections() {
  const chosen = $("ask-collection").value;
  return chosen ? [chosen] : null;
}

// The collections the caller reads, as last loaded ({collection_id, name, permission, ...}).
export function knownCollections() {
  return known;
}

export function resetCollections() {
  known = [];
  for (const id of ["upload-collection", "ask-collection"]) $(id).replaceChildren();
  $("upload-collection-field").hidden = true;
  $("ask-collection-field").hidden = true;
}
