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
  // Opened from /trust: the Trust page, read-only.
  var trust = startParam === "trust";
  // An action that needs the PIN names the key to seal it for (seal.js),
  // in the start_param Telegram signed.
  var needsPin = !pairing && !!(window.ArombaSeal && window.ArombaSeal.wardenKey(startParam));
  var CANNOT_SEAL =
    "This app cannot seal your PIN on this device, so nothing was sent. " +
    "Do it from a root terminal on your server instead: sudo aromba prod-mode off";

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

  function ask(what, sealedPin, undo) {
    var body = { launch: launch, ask: what };
    if (sealedPin) {
      body.sealed_pin = sealedPin;
    }
    if (undo) {
      body.undo = undo;
    }
    return fetch("v1/ask", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
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
    el("pin").value = "";
    el("pin-form").hidden = true;
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
      el("actions").hidden = false;
      if (needsPin) {
        say("Read what it does, type your PIN, then approve or not.");
        el("pin-form").hidden = false;
        el("pin").focus();
      } else {
        say(pairing ? "Read it, then confirm." : "Read what it does, then approve or not.");
        el("approve").focus();
      }
    } else {
      finish(answer.text);
    }
  }

  // The PIN, when the action needs it, sealed here for the Warden: what
  // leaves this page is bytes only the Warden can open.
  function sealed() {
    if (!needsPin) {
      return Promise.resolve(null);
    }
    var pin = el("pin").value;
    el("pin").value = "";
    return window.ArombaSeal.seal(pin, startParam).then(null, function () {
      throw new Error(CANNOT_SEAL);
    });
  }

  function approve() {
    if (el("approve").disabled) {
      return;
    }
    if (needsPin && el("pin").value === "") {
      say("Type your PIN first.");
      el("pin").focus();
      return;
    }
    el("approve").disabled = true;
    el("cancel").disabled = true;
    el("pin").disabled = true;
    say("Sent to your server…");
    sealed()
      .then(function (sealedPin) {
        return ask("approve", sealedPin);
      })
      .then(
        function (answer) {
          finish(answer.text);
        },
        function (e) {
          finish(e.message);
        }
      );
  }

  // One section of the Trust page: its heading and lines, as text only.
  function section(s) {
    var box = document.createElement("section");
    var h = document.createElement("h2");
    h.textContent = s.heading;
    box.appendChild(h);
    if (s.verbatim) {
      var pre = document.createElement("pre");
      pre.className = "verbatim";
      pre.textContent = s.lines.join("\n");
      pre.tabIndex = 0;
      box.appendChild(pre);
    } else {
      var list = document.createElement("ul");
      s.lines.forEach(function (line) {
        var li = document.createElement("li");
        li.textContent = line;
        list.appendChild(li);
      });
      box.appendChild(list);
    }
    if (s.undo) {
      var said = document.createElement("p");
      said.className = "said";
      said.setAttribute("role", "status");
      var undo = document.createElement("button");
      undo.type = "button";
      undo.textContent = "Undo";
      undo.addEventListener("click", function () {
        undo.disabled = true;
        said.textContent = "Asking your server…";
        ask("undo", null, s.undo).then(
          function (answer) {
            said.textContent = answer.text;
          },
          function (e) {
            said.textContent = e.message;
          }
        );
      });
      var actions = document.createElement("div");
      actions.className = "actions";
      actions.appendChild(undo);
      box.appendChild(actions);
      box.appendChild(said);
    }
    el("sections").appendChild(box);
  }

  function showPage(answer) {
    say(answer.text);
    (answer.sections || []).forEach(section);
    el("sections").hidden = false;
    el("done").hidden = false;
  }

  // The Trust page: the sections, then the policy, asked apart (each
  // answer fits one message between server and relay).
  function startTrust() {
    el("title").textContent = "Trust";
    ask("trust")
      .then(function (answer) {
        if (answer.kind !== "page") {
          finish(answer.text);
          return null;
        }
        showPage(answer);
        return ask("policy");
      })
      .then(
        function (policy) {
          if (policy && policy.kind === "page") {
            (policy.sections || []).forEach(section);
          } else if (policy) {
            section({ heading: "Policy", lines: [policy.text] });
          }
        },
        function (e) {
          if (el("sections").hidden) {
            finish(e.message);
          } else {
            section({ heading: "Policy", lines: [e.message] });
          }
        }
      );
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
    el("approve").addEventListener("click", approve);
    el("pin-form").addEventListener("submit", function (event) {
      event.preventDefault();
      approve();
    });
    if (!launch) {
      finish("This page opens from a button in your Aromba chat in Telegram.");
      return;
    }
    if (trust) {
      el("note").textContent =
        "Read-only: what your server's Warden says of itself, asked when you opened this. Nothing here changes anything without your approval.";
      startTrust();
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
