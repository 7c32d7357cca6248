"""How the coordinator and TaskManagers talk: the job secret, the handshake, frames and control messages.

A leaf package: it knows sockets and bytes, not jobs. Every connection between the coordinator and a
TaskManager, or between two TaskManagers, starts with the mutual handshake in `handshake`; only after
both ends proved they hold the job's secret is a frame read (`framing`). Control frames are JSON
(`messages`), never pickles; data frames carry pickled records between peers that authenticated.
"""
