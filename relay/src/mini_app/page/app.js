// The Mini App's page: what the button it was opened from is about (the
// Warden's own text, from the server), and the person's tap. It talks to
// Telegram's client through the launch parameters only (no script of
// anyone else's), and to the relay on one route, which passes the launch
// on untouched: only the Warden's check of Telegram's signature approves.
(function () {
  "use strict";

  var params = new URLSearchParams(window.location.hash.slice(1));
  var launch = params.get("tgWebAppData") || "";
  var startParam = new URLSearchParams(launch).get("start_param") || "";
  var pairing = startParam.indexOf("pair_") === 0;

  function el(id) {
    return document.getElementById(id);
  }

  // Telegram's client events (the documented postEvent protocol).
  function postEvent(type) {
    var data = JSON.stringify({});
    try {
      if (window.TelegramWebviewProxy && window.TelegramWebviewProxy.postEvent) {
        window.TelegramWebviewProxy.postEvent(type, data);
      } else if (window.external && "notify" in window.external) {
        window.external.notify(JSON.stringify({ eventType: type, eventData: {} }));
      } else if (window.parent !== window) {
        window.parent.postMessage(JSON.stringify({ eventType: type, eventData: {} }), "*");
      }
    } catch (e) {
      // Outside Telegram there is nobody to tell.
    }
  }

  // Telegram's theme colours, when given and well formed.
  function applyTheme() {
    var raw = params.get("tgWebAppThemeParams");
    if (!raw) {
      return;
    }
    var theme;
    try {
      theme = JSON.parse(raw);
    } catch (e) {
      return;
    }
    var names = {
      bg_color: "--bg",
      text_color: "--text",
      hint_color: "--hint",
      button_color: "--button",
      button_text_color: "--button-text",
      secondary_bg_color: "--secondary"
    };
    Object.keys(names).forEach(function (key) {
      var value = theme && theme[key];
      if (typeof value === "string" && /^#[0-9a-fA-F]{6}$/.test(value)) {
        document.documentElement.style.setProperty(names[key], value);
      }
    });
  }

  function say(words) {
    el("status").textContent = words;
  }

  function ask(what) {
    return fetch("v1/ask", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ launch: launch, ask: what }),
      credentials: "omit",
      cache: "no-store"
    }).then(function (response) {
      return response.json().then(
        function (body) {
          if (!response.ok) {
            throw new Error(body && body.message ? body.message : "The relay refused.");
          }
          return body;
        },
        function () {
          throw new Error("The relay's answer could not be read. Try again in a minute.");
        }
      );
    });
  }

  function finish(words) {
    say(words);
    el("actions").hidden = true;
    el("done").hidden = false;
    el("close").focus();
  }

  function show(answer) {
    if (answer.kind === "proposal") {
      el("title").textContent = pairing ? "Confirm it is you" : "Approve on your server?";
      el("text").textContent = answer.text;
      el("text").hidden = false;
      el("approve").textContent = pairing ? "Confirm" : "Approve";
      say(pairing ? "Read it, then confirm." : "Read what it does, then approve or not.");
      el("actions").hidden = false;
      el("approve").focus();
    } else {
      finish(answer.text);
    }
  }

  function start() {
    applyTheme();
    postEvent("web_app_ready");
    el("close").addEventListener("click", function () {
      postEvent("web_app_close");
    });
    el("cancel").addEventListener("click", function () {
      finish("Nothing was done. You can close this.");
    });
    el("approve").addEventListener("click", function () {
      el("approve").disabled = true;
      el("cancel").disabled = true;
      say("Sent to your server…");
      ask("approve").then(
        function (answer) {
          finish(answer.text);
        },
        function (e) {
          finish(e.message);
        }
      );
    });
    if (!launch) {
      finish("This page opens from a button in your Aromba chat in Telegram.");
      return;
    }
    ask("view").then(show, function (e) {
      finish(e.message);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
