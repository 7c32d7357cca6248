"""The runtime's name for a malformed document read from storage or the network.

Stored and received documents (`_metadata`, job results, control messages, REST documents) are read by
the contract's declarative codec (`sluice_contract.codec`), which names the document and the field that
is wrong. No field is trusted because of the document's name.
"""

from __future__ import annotations

from sluice_contract.codec import DocumentError

FormatError = DocumentError
"""A stored or received document that does not match its format."""
