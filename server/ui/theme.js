// Light or dark: the system's choice (`prefers-color-scheme`) unless the
// viewer picked one, remembered in localStorage. The choice is an attribute
// on <html> that app.css keys its colour variables on.

const KEY = 'leasehold.theme';
const NEXT = { auto: 'light', light: 'dark', dark: 'auto' };
const LABEL = { auto: '◐ Theme: auto', light: '☀ Theme: light', dark: '☾ Theme: dark' };

function stored() {
  try {
    const v = localStorage.getItem(KEY);
    return v in NEXT ? v : 'auto';
  } catch {
    return 'auto';
  }
}

function apply(button, mode) {
  if (mode === 'auto') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = mode;
  button.textContent = LABEL[mode];
  button.setAttribute('aria-label', `Colour theme: ${mode}; press for ${NEXT[mode]}`);
}

export function initTheme(button) {
  let mode = stored();
  apply(button, mode);
  button.addEventListener('click', () => {
    mode = NEXT[mode];
    try {
      localStorage.setItem(KEY, mode);
    } catch {
      // Private mode: the choice lasts for this page only.
    }
    apply(button, mode);
  });
}
