// The one confirmation dialog (delete a document, revoke a key, delete a user).

const $ = (id) => document.getElementById(id);

// Resolves true when the person chose `action` (the dialog's red button), false otherwise.
export function confirmAction({ title, text, action }) {
  const dialog = $("confirm");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-delete").textContent = action;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), {
      once: true,
    });
    dialog.returnValue = "";
    dialog.showModal();
  });
}

export function closeConfirm() {
  const dialog = $("confirm");
  if (dialog.open) dialog.close();
}
