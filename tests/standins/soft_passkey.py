"""A software passkey (a WebAuthn authenticator in Python, ES256, "none" attestation) that answers
the options the site sends as a browser's authenticator would, so the server's verification with
py_webauthn is exercised for real without a browser."""
import base64
import hashlib
import json
import os
import struct

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

UP, UV, AT = 0x01, 0x04, 0x40


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class SoftPasskey:
    def __init__(self, origin: str = "http://testserver"):
        self.origin = origin
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = os.urandom(16)
        self.counter = 0

    @property
    def id(self) -> str:
        return b64url(self.credential_id)

    def create(self, options: dict, *, user_verified: bool = True) -> dict:
        client_data = self._client_data("webauthn.create", options["challenge"])
        numbers = self.key.public_key().public_numbers()
        cose = {1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")}
        attested = bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id + cbor2.dumps(cose)
        auth_data = self._auth_data(options["rp"]["id"], UP | (UV if user_verified else 0) | AT) + attested
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return self._credential({"clientDataJSON": b64url(client_data), "attestationObject": b64url(attestation)})

    def get(self, options: dict, *, user_verified: bool = True, counter: int | None = None) -> dict:
        client_data = self._client_data("webauthn.get", options["challenge"])
        self.counter = self.counter + 1 if counter is None else counter
        auth_data = self._auth_data(options["rpId"], UP | (UV if user_verified else 0))
        signature = self.key.sign(auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256()))
        return self._credential({
            "clientDataJSON": b64url(client_data), "authenticatorData": b64url(auth_data), "signature": b64url(signature),
        })

    def _client_data(self, kind: str, challenge: str) -> bytes:
        return json.dumps({"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": False}).encode()

    def _auth_data(self, rp_id: str, flags: int) -> bytes:
        return hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + struct.pack(">I", self.counter)

    def _credential(self, response: dict) -> dict:
        return {"id": self.id, "rawId": self.id, "type": "public-key", "response": response, "clientExtensionResults": {}}
