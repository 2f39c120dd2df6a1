// The one switch between what the page shows. Every element marked data-view="name ..." is
// shown only while the current view is one of its names; the others carry `hidden`, which the
// stylesheet makes win over any display rule. A new view (an account page, say) is a new name
// on the elements it shows, nothing else.

export function showView(name) {
  document.body.dataset.view = name;
  for (const node of document.querySelectorAll("[data-view]")) {
    node.hidden = !node.dataset.view.split(/\s+/).includes(name);
  }
}


export function currentView() {
  return document.body.dataset.view || "";
}
