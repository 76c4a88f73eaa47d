// A Yjs (JavaScript) notebook editor driven by the tests: node notebook_peer.js <ws-url>
// Reads one JSON command a line on stdin:
//   {"insert": [index, "text"]}            insert at a code-point index
//   {"awareness": {...state...}}          set the local awareness state (y-protocols)
//   {"leave": true}                        say "gone" (a null awareness state), close and exit
// Writes one JSON line on stdout whenever something changes:
//   {"text": "...", "others": {"<clientId>": state, ...}}
const readline = require('readline');
const Y = require('yjs');
const awarenessProtocol = require('y-protocols/awareness');
const WebSocket = require('ws');

const [url] = process.argv.slice(2);
const doc = new Y.Doc();
const text = doc.getText('content');
const awareness = new awarenessProtocol.Awareness(doc);
awareness.setLocalState(null);
const ws = new WebSocket(url);
let synced = false;

function send(frame) {
  if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
}

function report() {
  const others = {};
  awareness.getStates().forEach((state, clientId) => {
    if (clientId !== doc.clientID) others[clientId] = state;
  });
  console.log(JSON.stringify({ synced, text: text.toString(), others }));
}

doc.on('update', (update, origin) => {
  if (origin !== 'remote') send({ type: 'update', update: Array.from(update) });
});
awareness.on('update', ({ added, updated, removed }, origin) => {
  if (origin === 'remote') return;
  const changed = added.concat(updated, removed);
  send({ type: 'awareness', update: Array.from(awarenessProtocol.encodeAwarenessUpdate(awareness, changed)) });
});
awareness.on('change', report);
doc.on('afterTransaction', report);

ws.on('message', (data) => {
  const message = JSON.parse(data.toString());
  if (message.type === 'sync' || message.type === 'update') {
    if (message.type === 'sync') synced = true;
    Y.applyUpdate(doc, Uint8Array.from(message.update), 'remote');
  } else if (message.type === 'awareness') {
    awarenessProtocol.applyAwarenessUpdate(awareness, Uint8Array.from(message.update), 'remote');
  }
});
ws.on('close', () => process.exit(0));

// Code-point index -> UTF-16 index, as Yjs counts in JavaScript.
function utf16(index) {
  return Array.from(text.toString()).slice(0, index).join('').length;
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const command = JSON.parse(line);
  if (command.insert) {
    text.insert(utf16(command.insert[0]), command.insert[1]);
  } else if (command.awareness) {
    awareness.setLocalState(command.awareness);
  } else if (command.leave) {
    awarenessProtocol.removeAwarenessStates(awareness, [doc.clientID], 'local');
    setTimeout(() => ws.close(1000), 50);
  }
});
setTimeout(() => { console.error('timeout: ' + text.toString()); process.exit(2); }, 60000);
