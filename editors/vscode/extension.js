// Starts `tfmc lsp` for .tfm files. Settings (tfm.*) become the server's
// initializationOptions; changing them restarts it.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function start() {
  const config = vscode.workspace.getConfiguration("tfm");
  const server = { command: config.get("tfmcPath"), args: ["lsp"] };
  client = new LanguageClient("tfm", "tfm", server, {
    documentSelector: [{ scheme: "file", language: "tfm" }],
    initializationOptions: {
      defines: config.get("defines"),
      variant: config.get("variant") || undefined,
      includeDirs: config.get("includeDirs"),
    },
  });
  return client.start();
}

function activate(context) {
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration(async (e) => {
    if (!e.affectsConfiguration("tfm")) return;
    if (client) await client.stop();
    await start();
  }));
  return start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
