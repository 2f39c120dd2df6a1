// Finding a document by the start of its name: a search field fills a picker with what the paged
// GET /documents listing (source_prefix) finds, so any document can be chosen, not only the
// first page. The test bench's "Only in the document" and the thumbs-down's "Document it should
// have used" both pick this way.

import { json } from "./api.js";
import { counted, describeError, element } from "./format.js";

const DOCUMENTS_SHOWN = 50; // documents offered at once; typing part of a name finds the rest
const TYPING_MS = 250; // a search waits this long after the last key

function option(value, label) {
  return element("option", { text: label, attrs: { value } });
}

// `search` (a text field), `picker` (a select) and `status` (its hint) are the finder's
// elements; `none` labels the empty choice; `collection()` names the collection to look in
// ("" for every one the caller reads).
export function documentFinder({ search, picker, status, none, collection = () => "" }) {
  let finds = 0; // the search's ticket: only the latest fills the picker
  let typing = 0;

  async function find() {
    const ticket = ++finds;
    const query = new URLSearchParams({ limit: String(DOCUMENTS_SHOWN) });
    const typed = search.value.trim();
    if (typed) query.set("source_prefix", typed);
    if (collection()) query.set("collection", collection());
    try {
      const listing = await json(`/documents?${query}`);
      if (ticket !== finds) return;
      const chosen = picker.value;
      const shown = listing.data;
      picker.replaceChildren(option("", none), ...shown.map((d) => option(d.document_id, d.source)));
      picker.value = shown.some((d) => d.document_id === chosen) ? chosen : "";
      const named = typed ? ` whose name starts with “${typed}”` : "";
      status.textContent = listing.count > shown.length
        ? `${shown.length} of ${listing.count} documents${named} listed; type more of the name to find the others.`
        : `${counted(listing.count, "document")}${named}.`;
    } catch (error) {
      if (ticket === finds) status.textContent = describeError(error, "Finding documents");
    }
  }

  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(find, TYPING_MS);
  });
  // Enter finds at once, and does not send the form the field sits in.
  search.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    event.preventDefault();
    clearTimeout(typing);
    find();
  });

  return {
    find,
    // Nothing found nor typed: the next session starts empty.
    reset() {
      finds += 1;
      clearTimeout(typing);
      search.value = "";
      picker.replaceChildren();
      status.textContent = "";
    },
  };
}
