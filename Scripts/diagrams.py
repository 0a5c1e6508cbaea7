#!/usr/bin/env python3
"""Writes the DocC catalogs' sequence diagrams (SVG) from the descriptions below: run it after changing one.

    python3 Scripts/diagrams.py            # writes Sources/Sesame/Sesame.docc/Resources/*.svg
    python3 Scripts/diagrams.py --check    # exits 1 when a file differs from what it would write (CI)
"""
import os
import sys
from xml.sax.saxutils import escape

OUT = os.path.join(os.path.dirname(__file__), "..", "Sources", "Sesame", "Sesame.docc", "Resources")

# (name, title, participants, steps); a step is (from, to, label) or ("note", participant, text).
DIAGRAMS = [
    ("sign-in-pkce", "Sign-in with OpenID Connect: authorization code + PKCE",
     ["App (OIDCAuth)", "Browser sheet", "Provider"],
     [
         ("App (OIDCAuth)", "App (OIDCAuth)", "verifier = 32 random bytes; challenge = S256(verifier); state, nonce"),
         ("App (OIDCAuth)", "Provider", "POST /par: client_id, redirect_uri, challenge, state, nonce (when offered)"),
         ("App (OIDCAuth)", "Browser sheet", "open /authorize?client_id&request_uri"),
         ("Browser sheet", "Provider", "the user signs in"),
         ("Provider", "Browser sheet", "303 redirect_uri?code&state&iss"),
         ("Browser sheet", "App (OIDCAuth)", "the redirect: iss and state checked first"),
         ("App (OIDCAuth)", "Provider", "POST /token: code + code_verifier"),
         ("Provider", "App (OIDCAuth)", "access, refresh and ID token"),
         ("note", "App (OIDCAuth)", "ID token verified against GET /jwks: signature, iss, aud, nonce, exp; then stored"),
     ]),
    ("refresh-storm", "A refresh storm, coalesced in one process and across processes",
     ["50 callers", "AuthSession (process A)", "Store + lock", "AuthSession (process B)", "Provider"],
     [
         ("50 callers", "AuthSession (process A)", "validTokens() x 50: the token expired"),
         ("note", "AuthSession (process A)", "one refresh task; the 49 others wait for it"),
         ("AuthSession (process A)", "Store + lock", "take the profile lock, re-read"),
         ("AuthSession (process B)", "Store + lock", "take the profile lock: waits"),
         ("AuthSession (process A)", "Provider", "POST /token grant_type=refresh_token (R1)"),
         ("Provider", "AuthSession (process A)", "new tokens, R2 (R1 is spent)"),
         ("AuthSession (process A)", "Store + lock", "save R2, then release"),
         ("AuthSession (process A)", "50 callers", "the same new token to all 50"),
         ("Store + lock", "AuthSession (process B)", "lock taken: re-read finds R2, valid"),
         ("note", "AuthSession (process B)", "adopts the stored tokens: no second refresh, R1 never presented again"),
     ]),
    ("dpop-nonce-retry", "DPoP: the server's nonce, and the one retry",
     ["App (DPoP key)", "Provider or API"],
     [
         ("App (DPoP key)", "Provider or API", "request + DPoP proof (htm, htu, iat, jti; ath for an API)"),
         ("Provider or API", "App (DPoP key)", "400/401 use_dpop_nonce, DPoP-Nonce: N1"),
         ("note", "App (DPoP key)", "remember N1 for this origin; a new proof with nonce N1"),
         ("App (DPoP key)", "Provider or API", "the same request + new proof (nonce N1)"),
         ("Provider or API", "App (DPoP key)", "200; DPoP-Nonce: N2 when it rotates"),
         ("note", "App (DPoP key)", "later requests use the latest nonce; a second demand is not retried again"),
     ]),
]


def svg(title, participants, steps):
    column = 190
    width = max(640, column * len(participants) + 40)
    x = {name: 20 + column // 2 + i * column for i, name in enumerate(participants)}
    top, row = 70, 44
    height = top + 40 + row * len(steps) + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="-apple-system, Helvetica, Arial, sans-serif" font-size="12">',
        f'<title>{escape(title)}</title>',
        '<defs><marker id="arrow" markerWidth="10" markerHeight="8" refX="9" refY="4" orient="auto">'
        '<path d="M0,0 L10,4 L0,8 z" fill="#333"/></marker></defs>',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{width // 2}" y="22" text-anchor="middle" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    for name, cx in x.items():
        out.append(f'<rect x="{cx - 85}" y="34" width="170" height="26" rx="5" fill="#eef3fb" stroke="#5577aa"/>')
        out.append(f'<text x="{cx}" y="51" text-anchor="middle" font-weight="bold">{escape(name)}</text>')
        out.append(f'<line x1="{cx}" y1="60" x2="{cx}" y2="{height - 16}" stroke="#99aacc" stroke-dasharray="4 3"/>')
    y = top + 24
    for step in steps:
        if step[0] == "note":
            cx = x[step[1]]
            w = min(width - 20, 7 * len(step[2]) + 16)
            left = max(10, min(cx - w // 2, width - 10 - w))
            out.append(f'<rect x="{left}" y="{y - 14}" width="{w}" height="22" rx="3" fill="#fff8dc" stroke="#c9b458"/>')
            out.append(f'<text x="{left + w // 2}" y="{y + 1}" text-anchor="middle">{escape(step[2])}</text>')
        else:
            a, b, label = step
            if a == b:
                cx = x[a]
                out.append(f'<path d="M{cx},{y - 6} h40 v14 h-38" fill="none" stroke="#333" marker-end="url(#arrow)"/>')
                out.append(f'<text x="{cx + 46}" y="{y + 4}">{escape(label)}</text>')
            else:
                x1, x2 = x[a], x[b]
                out.append(f'<line x1="{x1}" y1="{y + 4}" x2="{x2 + (-4 if x2 > x1 else 4)}" y2="{y + 4}" stroke="#333" marker-end="url(#arrow)"/>')
                out.append(f'<text x="{(x1 + x2) // 2}" y="{y - 2}" text-anchor="middle">{escape(label)}</text>')
        y += row
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    check = "--check" in sys.argv
    os.makedirs(OUT, exist_ok=True)
    stale = []
    for name, title, participants, steps in DIAGRAMS:
        path = os.path.join(OUT, name + ".svg")
        text = svg(title, participants, steps)
        if check:
            if not os.path.exists(path) or open(path).read() != text:
                stale.append(path)
        else:
            with open(path, "w") as handle:
                handle.write(text)
    if stale:
        print("diagrams.py: out of date (run python3 Scripts/diagrams.py): " + ", ".join(stale), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
