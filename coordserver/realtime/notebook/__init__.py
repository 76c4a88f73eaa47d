"""Live notebook pages in this process: `rooms.NotebookRooms` keeps one `room.Room` per open page (the
CRDT document its editors share), each socket in it a `peer.Peer`. The socket handler that admits a
peer is an HTTP handler: api/notebook_socket.py."""
