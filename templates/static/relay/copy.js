// Copy buttons: <button class="copy" data-copy="ID"> copies the text of the element with that id.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button.copy[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  try {
    await navigator.clipboard.writeText(source.textContent);
    button.textContent = "Copied";
  } catch {
    // No clipboard (an insecure origin): select the text so Ctrl-C copies it.
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = "Selected: press Ctrl-C";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 2000);
});
