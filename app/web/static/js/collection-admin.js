// The Collections section: the collections the caller reads (counts, who reads each, the
// caller's access); admins create them; whoever manages one (admins, a "manage" grant) edits its
// settings, its access and deletes it. The server checks every change anyway.

import { json, request } from "./api.js";
import { loadCollections } from "./collections.js";
import { confirmAction } from "./confirm.js";
import { counted, describeError, element, jsonBody, sleep, smallButton } from "./format.js";
import { closeAccess, setUpGrants, showAccess } from "./grants.js";
import { refreshGroups, resetGroups, setUpGroups, whenGroupsChanged } from "./groups.js";
import { refused } from "./refused.js";
import { roleAtLeast } from "./roles.js";

const $ = (id) => document.getElementById(id);
const GENERAL = "general";
const VISIBILITY = {
  tenant: "Everyone in the organisation",
  restricted: "Only those given access",
};
const DELETE_POLL_MS = 500;
const DELETE_POLLS = 120;
let collections = []; // the last GET /collections
let managed = null; // the collection the panel shows, or null

function report(text, { isError = false } = {}) {
  $("collections-error").textContent = isError ? text : "";
  $("collections-status").textContent = isError ? "" : text;
}

function reportPanel(text, { isError = false } = {}) {
  $("collection-panel-error").textContent = isError ? text : "";
  $("collection-panel-status").textContent = isError ? "" : text;
}

const path = (collection) => `/collections/${encodeURIComponent(collection.collection_id)}`;

function collectionRow(collection) {
  const actions = element("td", { className: "actions" });
  if (collection.permission === "manage") {
    actions.append(smallButton({ text: "Manage", label: `Manage ${collection.name}` },
      () => openPanel(collection)));
  }
  return element("tr", { attrs: { "data-collection": collection.collection_id } }, [
    element("td", { className: "name" }, [element("bdi", { text: collection.name })]),
    element("td", {}, [element("bdi", { text: collection.description || "—" })]),
    element("td", { text: VISIBILITY[collection.visibility] || collection.visibility }),
    element("td", { className: "num", text: String(collection.documents) }),
    element("td", { className: "num", text: String(collection.chunks) }),
    element("td", { text: collection.permission }),
    actions,
  ]);
}

// Reloads the list (and the pickers of Documents & Ask, which list the same collections).
async function refreshCollections() {
  try {
    const listing = await json("/collections");
    collections = listing.data;
    $("collections-body").replaceChildren(...collections.map(collectionRow));
  } catch (error) {
    report(describeError(error, "Loading the collections"), { isError: true });
  }
  loadCollections().catch(() => {}); // the pickers say nothing on their own
  if (managed) {
    const fresh = collections.find((c) => c.collection_id === managed.collection_id);
    if (fresh && fresh.permission === "manage") managed = fresh;
    else closePanel(); // deleted, or no longer yours to manage
  }
}

function openPanel(collection) {
  managed = collection;
  reportPanel("");
  $("collection-panel-name").textContent = collection.name;
  $("edit-collection-name").value = collection.name;
  $("edit-collection-description").value = collection.description;
  $("edit-collection-visibility").value = collection.visibility;
  // The general collection holds every document that was never put elsewhere: it stays.
  $("collection-delete").hidden = collection.collection_id === GENERAL;
  $("collection-panel").hidden = false;
  $("collection-panel-title").focus();
  showAccess(collection);
}

function closePanel() {
  managed = null;
  $("collection-panel").hidden = true;
  closeAccess();
}

async function createCollection(event) {
  event.preventDefault();
  const name = $("new-collection-name").value.trim();
  const description = $("new-collection-description").value.trim();
  const visibility = $("new-collection-visibility").value;
  if (!name) {
    report("Enter a name for the collection.", { isError: true });
    $("new-collection-name").focus();
    return;
  }
  let created;
  try {
    created = await json("/collections", jsonBody("POST", { name, description, visibility }));
  } catch (error) {
    report(refused(error, `Creating the collection “${name}”`), { isError: true });
    return;
  }
  $("collection-form").reset();
  report(`Created the collection ${created.name}.`);
  await refreshCollections();
}

async function saveSettings(event) {
  event.preventDefault();
  if (!managed) return;
  const before = managed;
  const patch = {};
  const name = $("edit-collection-name").value.trim();
  const description = $("edit-collection-description").value.trim();
  const visibility = $("edit-collection-visibility").value;
  if (name !== before.name) patch.name = name;
  if (description !== before.description) patch.description = description;
  if (visibility !== before.visibility) patch.visibility = visibility;
  if (Object.keys(patch).length === 0) {
    reportPanel("Nothing to save: change the name, the description or who reads it.");
    return;
  }
  try {
    const changed = await json(path(before), jsonBody("PATCH", patch));
    managed = changed;
    $("collection-panel-name").textContent = changed.name;
    reportPanel(`Saved “${changed.name}”.`);
  } catch (error) {
    reportPanel(refused(error, `Saving “${before.name}”`), { isError: true });
    return;
  }
  await refreshCollections();
  if (managed) showAccess(managed); // the access summary names the visibility
}

// Until the background job has deleted its documents and then the collection (404).
async function awaitDeletion(collection) {
  for (let poll = 0; poll < DELETE_POLLS; poll += 1) {
    await sleep(DELETE_POLL_MS);
    try {
      await json(path(collection));
    } catch (error) {
      if (error.status === 404) return true;
      throw error;
    }
  }
  return false;
}

async function deleteWithDocuments(collection) {
  const sure = await confirmAction({
    title: "Delete its documents too?",
    text: `“${collection.name}” still holds documents, so it was not deleted. Delete the ` +
      "collection and every document in it? Answers will no longer cite them. Cancel to move " +
      "the documents you want to keep first.",
    action: "Delete with documents",
  });
  if (!sure) {
    reportPanel(`“${collection.name}” was not deleted: it holds documents. Move them to ` +
      "another collection (a document's Details), or delete them with it.", { isError: true });
    return;
  }
  try {
    const response = await request(`${path(collection)}?documents=delete`, { method: "DELETE" });
    if (response.status === 202) {
      const job = await response.json();
      reportPanel(`Deleting ${counted(job.documents, "document")}, then “${collection.name}”…`);
      if (!(await awaitDeletion(collection))) {
        reportPanel(`Still deleting the documents of “${collection.name}”; look again later.`);
        return;
      }
    }
  } catch (error) {
    reportPanel(refused(error, `Deleting “${collection.name}”`), { isError: true });
    return;
  }
  closePanel();
  report(`Deleted the collection ${collection.name} and its documents.`);
  await refreshCollections();
}

async function deleteCollection() {
  if (!managed) return;
  const collection = managed;
  const sure = await confirmAction({
    title: "Delete collection?",
    text: `“${collection.name}” will be deleted. Its grants go with it.`,
    action: "Delete",
  });
  if (!sure) return;
  try {
    await request(path(collection), { method: "DELETE" });
  } catch (error) {
    if (error.status === 409 && collection.collection_id !== GENERAL) {
      await deleteWithDocuments(collection);
    } else {
      reportPanel(refused(error, `Deleting “${collection.name}”`), { isError: true });
    }
    return;
  }
  closePanel();
  report(`Deleted the collection ${collection.name}.`);
  await refreshCollections();
}

export async function openCollectionsView() {
  await Promise.all([refreshCollections(), refreshGroups()]);
}

export function resetCollectionsView() {
  collections = [];
  closePanel();
  $("collection-form").reset();
  report("");
  $("collections-body").replaceChildren();
  resetGroups();
}

export function setUpCollectionsView() {
  $("collection-form").addEventListener("submit", createCollection);
  $("collection-edit-form").addEventListener("submit", saveSettings);
  $("collection-delete").addEventListener("click", deleteCollection);
  $("collection-panel-close").addEventListener("click", () => {
    const name = managed?.name;
    closePanel();
    const row = [...$("collections-body").querySelectorAll("button")]
      .find((b) => b.getAttribute("aria-label") === `Manage ${name}`);
    (row || $("collections-title")).focus();
  });
  setUpGrants();
  setUpGroups();
  whenGroupsChanged(() => {
    if (managed && roleAtLeast("admin")) showAccess(managed);
  });
}
