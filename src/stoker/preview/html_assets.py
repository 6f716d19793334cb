"""The style sheet and the small script of the HTML preview (inline: the page needs no network).

The script only switches tabs and opens a sample's details in a dialog; without it the gallery,
captions and header still show.
"""

from __future__ import annotations

CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:0;background:#f4f4f6;color:#222}
header{background:#1f2a44;color:#fff;padding:.8em 1.5em}
header h1{font-size:1.15em;margin:0}header .path{font-family:monospace;opacity:.85}
nav.tabs{display:flex;gap:.3em;padding:.6em 1.5em 0;background:#e4e6ee}
.tab{border:0;background:#cfd3e0;padding:.5em 1em;border-radius:6px 6px 0 0;cursor:pointer;
font-size:.95em}
.tab[aria-selected=true]{background:#f4f4f6;font-weight:bold}
.panel{padding:1em 1.5em}.panel[hidden]{display:none}
section.dataset{margin-bottom:1.5em}
section.dataset h1{font-size:1.05em;font-family:monospace;margin:.2em 0 .4em}
dl.summary{display:flex;flex-wrap:wrap;gap:.4em 1.6em;margin:0 0 .4em;font-size:.88em}
dl.summary dt{color:#666}dl.summary dd{margin:0 0 0 .3em;font-weight:600}
dl.summary div{display:flex}
.range{color:#555;font-size:.85em;margin:.2em 0 .8em}
.gallery{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:.8em}
.card{background:#fff;border-radius:8px;box-shadow:0 1px 3px #0002;cursor:pointer;
overflow:hidden;display:flex;flex-direction:column}
.card:hover,.card:focus{outline:2px solid #3b6fd8}
.card .media{height:150px;display:flex;align-items:center;justify-content:center;
background:#eceef3;overflow:hidden}
.card .media img{max-width:100%;max-height:150px;object-fit:contain}
.card .media img+img{display:none}
.card .media.strip{display:grid;grid-template-columns:repeat(4,1fr);gap:2px;align-content:center}
.card .media.strip img{display:block;width:100%;height:auto}
.placeholder{color:#667;font-size:.85em;padding:.6em;text-align:center}
.card h2{font-size:.78em;font-family:monospace;margin:.45em .6em 0;overflow:hidden;line-height:1.4;
text-overflow:ellipsis;white-space:nowrap}
.caption{font-size:.85em;margin:.25em .6em .6em;display:-webkit-box;-webkit-line-clamp:3;
-webkit-box-orient:vertical;overflow:hidden}
.badge{font-size:.75em;color:#444;margin:0 .6em .5em}
.error{color:#b00020;font-family:monospace}
dialog{max-width:min(900px,92vw);border:0;border-radius:10px;padding:1.2em;
box-shadow:0 8px 30px #0005}
dialog .media{display:flex;flex-wrap:wrap;gap:.3em;margin-bottom:.6em}
dialog .media img{display:block;max-width:100%;max-height:60vh}
dialog .media.strip img{height:90px}
dialog .close{float:right;border:0;background:#eee;border-radius:4px;cursor:pointer;
font-size:1.1em}
.detail table{border-collapse:collapse;width:100%;margin:.4em 0}.detail table.parts{width:auto}
.detail td,.detail th{vertical-align:top;padding:.3em .5em;border-top:1px solid #eee;
text-align:left;font-size:.88em}
.detail td.name{font-family:monospace;font-weight:bold;white-space:nowrap}
.summary-line{font-family:monospace;color:#555;font-size:.9em}
.text{white-space:pre-wrap;margin-top:.2em}
.where{color:#666;font-size:.85em}
"""

SCRIPT = """
for (const tab of document.querySelectorAll('.tab')) {
  tab.addEventListener('click', () => {
    for (const other of document.querySelectorAll('.tab')) {
      other.setAttribute('aria-selected', String(other === tab));
    }
    for (const panel of document.querySelectorAll('.panel')) {
      panel.hidden = panel.id !== tab.dataset.panel;
    }
  });
}
const dialog = document.getElementById('detail');
dialog.querySelector('.close').addEventListener('click', () => dialog.close());
for (const card of document.querySelectorAll('.card')) {
  const open = () => {
    const body = dialog.querySelector('.body');
    body.replaceChildren(card.querySelector('h2').cloneNode(true));
    const media = card.querySelector('.media');
    if (media.querySelector('img')) body.append(media.cloneNode(true));
    const detail = card.querySelector('.detail').cloneNode(true);
    detail.hidden = false;
    body.append(detail);
    dialog.showModal();
  };
  card.addEventListener('click', open);
  card.addEventListener('keydown', (e) => { if (e.key === 'Enter') open(); });
}
"""
