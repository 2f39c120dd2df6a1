// The one switch between what the page shows. Every element marked data-view="name ..." is
// shown only while the current view is one of its names; the others carry `hidden`, which the
// stylesheet makes win over any display rule. A new view is a new name on the elements it
// shows, nothing else. The views: signed-out, loading, and the signed-in sections documents,
// collections, quality, account, users and activity (the links in the top bar, marked data-section).

export function showView(name) {
  document.body.dataset.view = name;
  for (const node of document.querySelectorAll("[data-view]")) {
    node.hidden = !node.dataset.view.split(/\s+/).includes(name);
  }
  for (const link of document.querySelectorAll("[data-section]")) {
    if (link.dataset.section === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}


export function currentView() {
  return document.body.dataset.view || "";
}
