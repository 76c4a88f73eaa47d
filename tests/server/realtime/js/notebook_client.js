// A Yjs (JavaScript) notebook client for the interop test: node notebook_client.js <ws-url> <insert> <wait-for>
// Inserts <insert> at the end once synced, prints the text (JSON) once it holds both strings, then exits.
const Y = require('yjs');
const WebSocket = require('ws');

const [url, insertText, waitFor] = process.argv.slice(2);
const doc = new Y.Doc();
const text = doc.getText('content');
const ws = new WebSocket(url);
let synced = false;
let done = false;

doc.on('update', (update, origin) => {
  if (origin !== 'remote') ws.send(JSON.stringify({ type: 'update', update: Array.from(update) }));
});

ws.on('message', (data) => {
  const message = JSON.parse(data.toString());
  if (message.type === 'sync' || message.type === 'update') {
    Y.applyUpdate(doc, Uint8Array.from(message.update), 'remote');
    if (message.type === 'sync' && !synced) {
      synced = true;
      text.insert(text.length, insertText);
    }
  }
  const value = text.toString();
  if (!done && synced && value.includes(waitFor) && value.includes(insertText)) {
    done = true;
    console.log(JSON.stringify(value));
    ws.close(1000);
  }
});
ws.on('close', () => process.exit(done ? 0 : 1));
setTimeout(() => { console.error('timeout: ' + text.toString()); process.exit(2); }, 15000);
