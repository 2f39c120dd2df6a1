// Metadata filter rows ("Only documents where <field> <is> <value>"), one set per form: the Ask
// form's and the test bench's. Each set reads its rows as the API's filter conditions; the rows
// are labelled "<Part> of <noun> <n>" so two sets on one page never share a label.

import { listedDocuments } from "./documents.js";
import { element, smallButton } from "./format.js";

const CONDITIONS = {
  $eq: "is",
  $ne: "is not",
  $contains: "contains",
  $gte: "is at least",
  $lte: "is at most",
};
// The built-in fields every document has (the API's filter fields), and the one that is a number.
const BUILT_IN = ["source", "collection", "content_type", "language", "uploaded_at", "uploaded_by",
  "page", "document_id"];
const WHOLE_NUMBERS = new Set(["page"]);
const PARTS = { field: "Field of", condition: "Condition of", value: "Value of", remove: "Remove" };

// The values the listed documents hold for a custom field (to send a value of the same kind).
function knownValues(field) {
  return listedDocuments()
    .map((doc) => (doc.metadata || {})[field])
    .filter((value) => value !== undefined);
}

// A typed value as the field holds it: a number for numbers, true/false for yes-or-no fields,
// else text (a list field is matched by one of its items). Throws with what to fix.
function typedValue(field, text, number) {
  const trimmed = text.trim();
  const asNumber = Number(trimmed);
  if (WHOLE_NUMBERS.has(field)) {
    if (!/^\d+$/.test(trimmed)) throw new Error(`Filter ${number}: ${field} is a whole number.`);
    return asNumber;
  }
  if (BUILT_IN.includes(field)) return text;
  const values = knownValues(field);
  if (values.some((v) => typeof v === "number")) {
    if (trimmed === "" || !Number.isFinite(asNumber)) {
      throw new Error(`Filter ${number}: ${field} holds numbers; “${text}” is not one.`);
    }
    return asNumber;
  }
  if (values.some((v) => typeof v === "boolean")) {
    if (/^(yes|true)$/i.test(trimmed)) return true;
    if (/^(no|false)$/i.test(trimmed)) return false;
    throw new Error(`Filter ${number}: ${field} is yes or no.`);
  }
  return text;
}

// One filter tree of several conditions (null: none, one: itself, more: all of them).
export function allOf(conditions) {
  if (conditions.length === 0) return null;
  return conditions.length === 1 ? conditions[0] : { $and: conditions };
}

// The scope `read()` gives, or null after saying in `status` what to fix (a filter to finish
// first: nothing is to be sent).
export function checkedScope(read, status) {
  try {
    return read();
  } catch (problem) {
    status.textContent = problem.message;
    return null;
  }
}

// The filter rows in `rows` (a list), with field names offered by `fields` (a datalist) and a
// row added by `add` (a button); `noun` names a row in its labels ("filter": "Value of filter 1").
export function filterRows({ rows, fields, add, noun }) {
  const all = () => [...rows.children];

  function drawFieldChoices() {
    const custom = new Set();
    for (const doc of listedDocuments()) {
      for (const key of Object.keys(doc.metadata || {})) custom.add(key);
    }
    const names = [...[...custom].sort(), ...BUILT_IN];
    fields.replaceChildren(...names.map((name) => element("option", { attrs: { value: name } })));
  }

  function renumber() {
    all().forEach((row, i) => {
      for (const [part, text] of Object.entries(PARTS)) {
        row.querySelector(`[data-part="${part}"]`).setAttribute("aria-label", `${text} ${noun} ${i + 1}`);
      }
    });
  }

  function addRow() {
    drawFieldChoices();
    const field = element("input", {
      attrs: { list: fields.id, maxlength: "40", autocomplete: "off", spellcheck: "false",
        "data-part": "field" },
    });
    const condition = element("select", { attrs: { "data-part": "condition" } },
      Object.entries(CONDITIONS).map(([op, text]) => element("option", { text, attrs: { value: op } })));
    const value = element("input", {
      attrs: { maxlength: "256", autocomplete: "off", dir: "auto", "data-part": "value" },
    });
    const remove = smallButton({ text: "Remove", attrs: { "data-part": "remove" } }, () => {
      row.remove();
      renumber();
      add.focus();
    });
    const row = element("li", {}, [field, condition, value, remove]);
    rows.append(row);
    renumber();
    field.focus();
  }

  add.addEventListener("click", addRow);
  return {
    // The rows as filter conditions, in order; throws an Error saying what to fix.
    conditions() {
      return all().map((row, i) => {
        const part = (name) => row.querySelector(`[data-part="${name}"]`);
        const field = part("field").value.trim();
        const value = part("value").value;
        const number = i + 1;
        if (!field) throw new Error(`Filter ${number}: choose a field.`);
        if (!value.trim()) throw new Error(`Filter ${number}: enter a value.`);
        return { [field]: { [part("condition").value]: typedValue(field, value, number) } };
      });
    },
    reset() {
      rows.replaceChildren();
      fields.replaceChildren();
    },
  };
}
