// The chat page's behaviour: follows the chat over server-sent events and
// sends what the person types or taps. Text from the bot is only ever set
// as text (never as markup), so a message cannot change the page.
"use strict";

(function () {
  const log = document.getElementById("log");
  const empty = document.getElementById("empty");
  const linkState = document.getElementById("link-state");
  const form = document.getElementById("send-form");
  const input = document.getElementById("text");
  const menuButton = document.getElementById("menu-button");
  const menu = document.getElementById("menu");
  const toast = document.getElementById("toast");
  const alertBox = document.getElementById("alert");
  const alertText = document.getElementById("alert-text");

  // Message id -> { element, signature }.
  const shown = new Map();
  // Callback query ids whose answers were already shown.
  const answersSeen = new Set();
  // Taps sent from this page and not answered yet: "messageId\u0000data".
  const pending = new Set();
  let firstSnapshot = true;
  let toastTimer = null;

  async function post(path, body) {
    const response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      let why = response.statusText;
      try { why = (await response.json()).error || why; } catch (_) { /* not JSON */ }
      throw new Error(why);
    }
    return response.json();
  }

  function showToast(text) {
    toast.textContent = text;
    toast.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { toast.hidden = true; }, 4000);
  }

  function showAlert(text) {
    alertText.textContent = text;
    if (typeof alertBox.showModal === "function") {
      alertBox.showModal();
    } else {
      window.alert(text);
    }
  }

  // The text with its monospace spans (offsets in UTF-16 units, as a
  // JavaScript string counts).
  function renderText(container, text, monospace) {
    container.replaceChildren();
    const spans = (monospace || []).slice().sort((a, b) => a[0] - b[0]);
    let at = 0;
    for (const [offset, length] of spans) {
      if (offset < at) continue;
      if (offset > at) container.append(document.createTextNode(text.slice(at, offset)));
      const pre = document.createElement("pre");
      pre.textContent = text.slice(offset, offset + length);
      container.append(pre);
      at = offset + length;
    }
    if (at < text.length) container.append(document.createTextNode(text.slice(at)));
  }

  function tapKey(messageId, data) { return messageId + "\u0000" + data; }

  function renderKeyboard(message, rows) {
    const keyboard = document.createElement("div");
    keyboard.className = "keyboard";
    keyboard.setAttribute("role", "group");
    keyboard.setAttribute("aria-label", "Buttons");
    for (const row of rows) {
      const line = document.createElement("div");
      line.className = "row";
      for (const button of row) {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = button.text;
        b.dataset.data = button.data;
        if (isLink(button.data)) {
          // Opens a Mini App, as Telegram does: a panel over the chat.
          b.classList.add("link");
          b.addEventListener("click", () => openApp(message.id, button.data));
        } else {
          if (pending.has(tapKey(message.id, button.data))) b.setAttribute("aria-busy", "true");
          b.addEventListener("click", () => tap(message.id, button.data, b));
        }
        line.append(b);
      }
      keyboard.append(line);
    }
    return keyboard;
  }

  function isLink(data) { return data.startsWith("https://") || data.startsWith("http://"); }

  const appPanel = document.getElementById("app-panel");
  const appFrame = document.getElementById("app-frame");
  let appOpener = null;

  async function openApp(messageId, url) {
    try {
      const opened = await post("open", { message_id: messageId, url: url });
      appOpener = document.activeElement;
      appFrame.src = opened.url;
      appPanel.hidden = false;
      appFrame.focus();
    } catch (e) {
      showToast("The app did not open: " + e.message);
    }
  }

  function closeApp() {
    appPanel.hidden = true;
    appFrame.src = "about:blank";
    if (appOpener && appOpener.isConnected) appOpener.focus();
  }

  document.getElementById("app-close").addEventListener("click", closeApp);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !appPanel.hidden) closeApp();
  });
  // The app's `web_app_close`, sent to its parent as Telegram's web client
  // receives it.
  window.addEventListener("message", (e) => {
    if (e.source !== appFrame.contentWindow) return;
    try {
      const event = JSON.parse(e.data);
      if (event && event.eventType === "web_app_close") closeApp();
    } catch (_) { /* not an event */ }
  });

  async function tap(messageId, data, button) {
    const key = tapKey(messageId, data);
    if (pending.has(key)) return;
    pending.add(key);
    button.setAttribute("aria-busy", "true");
    try {
      await post("tap", { message_id: messageId, data: data });
    } catch (e) {
      pending.delete(key);
      button.removeAttribute("aria-busy");
      showToast("The tap did not go through: " + e.message);
    }
  }

  function renderMessage(message) {
    const signature = JSON.stringify([message.text, message.monospace, message.buttons, message.edited, message.at]);
    const known = shown.get(message.id);
    if (known && known.signature === signature) return known.element;
    const element = known ? known.element : document.createElement("article");
    element.className = "msg " + message.from;
    element.dataset.id = message.id;
    element.setAttribute("aria-label", message.from === "bot" ? "Aromba" : "You");
    const focused = document.activeElement;
    const hadFocus = element.contains(focused) && focused.dataset && focused.dataset.data !== undefined
      ? focused.dataset.data : null;
    element.replaceChildren();
    const text = document.createElement("div");
    text.className = "text";
    renderText(text, message.text, message.monospace);
    element.append(text);
    // When it was sent, in this browser's time, as Telegram shows it.
    const meta = document.createElement("span");
    meta.className = "meta";
    const time = document.createElement("time");
    if (message.at) {
      const at = new Date(message.at * 1000);
      time.dateTime = at.toISOString();
      time.textContent = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    }
    meta.append(time);
    if (message.edited) meta.append(" · edited");
    element.append(meta);
    if (message.buttons && message.buttons.length > 0) {
      element.append(renderKeyboard(message, message.buttons));
      if (hadFocus !== null) {
        const again = Array.from(element.querySelectorAll(".keyboard button"))
          .find((b) => b.dataset.data === hadFocus);
        if (again) again.focus();
      }
    }
    shown.set(message.id, { element, signature });
    return element;
  }

  function renderMenu(commands) {
    menu.replaceChildren();
    for (const c of commands) {
      const item = document.createElement("li");
      item.setAttribute("role", "none");
      const b = document.createElement("button");
      b.type = "button";
      b.setAttribute("role", "menuitem");
      const command = document.createElement("span");
      command.className = "command";
      command.textContent = "/" + c.command;
      const description = document.createElement("span");
      description.className = "description";
      description.textContent = c.description;
      b.append(command, description);
      b.addEventListener("click", () => {
        closeMenu(false);
        sendText("/" + c.command);
      });
      item.append(b);
      menu.append(item);
    }
    menuButton.disabled = commands.length === 0;
  }

  function openMenu() {
    menu.hidden = false;
    menuButton.setAttribute("aria-expanded", "true");
    const first = menu.querySelector("[role=menuitem]");
    if (first) first.focus();
  }

  function closeMenu(refocus) {
    menu.hidden = true;
    menuButton.setAttribute("aria-expanded", "false");
    if (refocus) menuButton.focus();
  }

  menuButton.addEventListener("click", () => (menu.hidden ? openMenu() : closeMenu(true)));
  menu.addEventListener("keydown", (e) => {
    const items = Array.from(menu.querySelectorAll("[role=menuitem]"));
    const at = items.indexOf(document.activeElement);
    if (e.key === "Escape") { e.preventDefault(); closeMenu(true); }
    else if (e.key === "ArrowDown") { e.preventDefault(); items[(at + 1) % items.length].focus(); }
    else if (e.key === "ArrowUp") { e.preventDefault(); items[(at - 1 + items.length) % items.length].focus(); }
    else if (e.key === "Home") { e.preventDefault(); items[0].focus(); }
    else if (e.key === "End") { e.preventDefault(); items[items.length - 1].focus(); }
  });
  document.addEventListener("click", (e) => {
    if (!menu.hidden && !menu.contains(e.target) && e.target !== menuButton) closeMenu(false);
  });

  function render(chat) {
    document.getElementById("bot-name").textContent = chat.bot.name;
    const nearBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 80;
    const ids = new Set(chat.messages.map((m) => m.id));
    for (const [id, known] of shown) {
      if (!ids.has(id)) { known.element.remove(); shown.delete(id); }
    }
    let previous = empty;
    for (const message of chat.messages) {
      const element = renderMessage(message);
      if (previous.nextSibling !== element) previous.after(element);
      previous = element;
    }
    empty.hidden = chat.messages.length > 0;
    renderMenu(chat.commands);
    for (const t of chat.taps) {
      if (!t.answered) continue;
      pending.delete(tapKey(t.message_id, t.data));
      if (answersSeen.has(t.query)) continue;
      answersSeen.add(t.query);
      if (!firstSnapshot && t.answer) (t.alert ? showAlert : showToast)(t.answer);
    }
    for (const b of log.querySelectorAll(".keyboard button[aria-busy]")) {
      const id = b.closest(".msg").dataset.id;
      if (!pending.has(tapKey(Number(id), b.dataset.data))) b.removeAttribute("aria-busy");
    }
    if (nearBottom || firstSnapshot) log.scrollTop = log.scrollHeight;
    firstSnapshot = false;
  }

  async function sendText(text) {
    try {
      await post("send", { text: text });
      return true;
    } catch (e) {
      showToast("Not sent: " + e.message);
      return false;
    }
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (text === "") return;
    input.value = "";
    if (!(await sendText(text))) input.value = text;
    input.focus();
  });

  function follow() {
    const events = new EventSource("events");
    events.addEventListener("chat", (e) => {
      linkState.textContent = "bot";
      render(JSON.parse(e.data));
    });
    events.addEventListener("error", () => {
      linkState.textContent = "reconnecting…";
    });
  }

  follow();
  input.focus();
})();
