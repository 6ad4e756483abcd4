// graphc view: draws a placed graph from the JSON in #graph-data, offline.
//
// Towers and name scopes are boxes, collapsed at first; the layout only ever
// sees the boxes and nodes that are visible, which keeps graphs of tens of
// thousands of nodes usable. Each expanded box lays its children out in
// layers (longest path over the edges between them, cycles broken by depth-
// first search, rows ordered by barycentres) and becomes a child of its parent
// with that size. Edges are drawn between whatever represents their ends.
//
// With a run (graphc view --metrics/--trace), DATA.run holds
//   metrics {file, steps [[step, loss, lr]], evals [[step, loss, accuracy or null (mse)]]}
//   trace {file, profiled_steps, averaged [first, last], first_step_ms, wall_ms,
//          parts [name], devices [[name, busy_ms, [ms per step by part]]]}
// and a panel above the details draws the loss curve and each device's step as a bar of its
// breakdown's parts (busy: kernels ran). Clicking a device fades the nodes of the others.
'use strict';
(function () {
  const started = performance.now();
  const DATA = JSON.parse(document.getElementById('graph-data').textContent);
  const SVGNS = 'http://www.w3.org/2000/svg';
  const NODE_H = 34, BOX_H = 48, GAP_X = 18, GAP_Y = 44, PAD = 12, HEADER = 24, CHAR_W = 6.4;

  // Node fields: name, op, cluster, device, requested, reason, tower, outputs [[type, bytes]],
  // attributes, operands [producer, result, ...]. Cluster fields: label, parent, isTower, total.
  const N_NAME = 0, N_OP = 1, N_CLUSTER = 2, N_DEV = 3, N_REQ = 4, N_REASON = 5, N_TOWER = 6,
    N_OUTS = 7, N_ATTRS = 8, N_OPERANDS = 9;
  const C_LABEL = 0, C_PARENT = 1, C_TOWER = 2, C_TOTAL = 3;

  const canvas = document.getElementById('canvas');
  const panel = document.getElementById('panel');
  const status = document.getElementById('status');
  const search = document.getElementById('search');
  const matches = document.getElementById('matches');

  let graph, nodes, clusters, kidsOf, rootKids, firstNodeOf, devCount, usersOf;
  let expanded = new Set();
  let selected = null; // 'n12' or 'c3'
  let boxes = new Map(); // unit key -> absolute {x, y, w, h}
  let view = { x: 0, y: 0, k: 1 };
  let focusDev = -1; // a device whose nodes stand out (a click on its bar), or -1
  let svg, viewport;

  function el(tag, attrs, parent) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function html(tag, text, parent, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    if (parent) parent.appendChild(e);
    return e;
  }
  function mib(bytes) {
    if (bytes < 1024) return bytes + ' B';
    if (bytes < 1 << 20) return (bytes / 1024).toFixed(1) + ' KiB';
    return (bytes / (1 << 20)).toFixed(1) + ' MiB';
  }
  function leafName(n) {
    const name = nodes[n][N_NAME];
    const i = name.lastIndexOf('/');
    return i < 0 ? name : name.slice(i + 1);
  }
  function deviceName(d) { return d >= 0 ? DATA.devices[d][0] : '(unassigned)'; }
  function deviceColor(d) { return d >= 0 ? DATA.devices[d][1] : '#ffffff'; }

  //===-- Graph tables --------------------------------------------------------===//

  function loadGraph(index) {
    graph = DATA.graphs[index];
    nodes = graph.nodes;
    clusters = graph.clusters;
    kidsOf = clusters.map(() => ({ clusters: [], nodes: [] }));
    rootKids = { clusters: [], nodes: [] };
    clusters.forEach((c, i) => (c[C_PARENT] < 0 ? rootKids : kidsOf[c[C_PARENT]]).clusters.push(i));
    firstNodeOf = clusters.map(() => Infinity);
    devCount = clusters.map(() => new Map());
    usersOf = nodes.map(() => []);
    nodes.forEach((n, i) => {
      (n[N_CLUSTER] < 0 ? rootKids : kidsOf[n[N_CLUSTER]]).nodes.push(i);
      for (let c = n[N_CLUSTER]; c >= 0; c = clusters[c][C_PARENT]) {
        firstNodeOf[c] = Math.min(firstNodeOf[c], i);
        devCount[c].set(n[N_DEV], (devCount[c].get(n[N_DEV]) || 0) + 1);
      }
      const ops = n[N_OPERANDS];
      for (let k = 0; k < ops.length; k += 2) usersOf[ops[k]].push(i);
    });
    expanded = new Set();
    selected = null;
    render();
    fit();
    showSummary();
  }

  // The visible unit of a node: its outermost collapsed box, else itself.
  function unitOf(n) {
    let top = -1;
    for (let c = nodes[n][N_CLUSTER]; c >= 0; c = clusters[c][C_PARENT]) if (!expanded.has(c)) top = c;
    return top >= 0 ? 'c' + top : 'n' + n;
  }
  // Expanded boxes from the top down to the one holding `key`.
  function containers(key) {
    const path = [];
    let c = key[0] === 'n' ? nodes[+key.slice(1)][N_CLUSTER] : clusters[+key.slice(1)][C_PARENT];
    for (; c >= 0; c = clusters[c][C_PARENT]) path.push(c);
    return path.reverse();
  }

  //===-- Layout --------------------------------------------------------------===//

  function visibleEdges() {
    const unit = nodes.map((_, i) => unitOf(i));
    const edges = new Map();
    nodes.forEach((n, t) => {
      const ops = n[N_OPERANDS];
      for (let k = 0; k < ops.length; k += 2) {
        const s = ops[k], a = unit[s], b = unit[t];
        if (a === b) continue;
        const key = a + '>' + b;
        let e = edges.get(key);
        if (!e) edges.set(key, e = { from: a, to: b, count: 0, crossBytes: 0, cross: false });
        e.count++;
        if (nodes[s][N_DEV] !== n[N_DEV]) {
          e.cross = true;
          const out = nodes[s][N_OUTS][ops[k + 1]];
          e.crossBytes += out ? out[1] : 0;
        }
      }
    });
    return [...edges.values()];
  }

  // Edges between the children of each expanded box (and of the top level, -1).
  function localEdges(edges) {
    const local = new Map();
    for (const e of edges) {
      const pa = containers(e.from), pb = containers(e.to);
      let i = 0;
      while (i < pa.length && i < pb.length && pa[i] === pb[i]) i++;
      const owner = i === 0 ? -1 : pa[i - 1];
      const a = i < pa.length ? 'c' + pa[i] : e.from, b = i < pb.length ? 'c' + pb[i] : e.to;
      if (a === b) continue;
      if (!local.has(owner)) local.set(owner, new Map());
      local.get(owner).set(a + '>' + b, [a, b]);
    }
    return local;
  }

  function measureNode(n) {
    const w = Math.max(leafName(n).length, nodes[n][N_OP].length) * CHAR_W + 18;
    return { w: Math.max(64, Math.min(w, 320)), h: NODE_H };
  }
  function clusterCaption(c) {
    const devs = [...devCount[c].keys()].sort((a, b) => a - b).map(deviceName);
    return clusters[c][C_TOTAL] + ' nodes · ' + devs.join(' ');
  }
  function measureCollapsed(c) {
    const chars = Math.max(clusters[c][C_LABEL].length + 3, clusterCaption(c).length);
    return { w: Math.max(90, Math.min(chars * CHAR_W + 22, 420)), h: BOX_H };
  }

  function layoutBox(owner, local) {
    const kids = owner < 0 ? rootKids : kidsOf[owner];
    const items = [];
    for (const c of kids.clusters) {
      if (expanded.has(c)) {
        const sub = layoutBox(c, local);
        items.push({ key: 'c' + c, order: firstNodeOf[c], w: sub.w, h: sub.h, sub });
      } else {
        items.push(Object.assign({ key: 'c' + c, order: firstNodeOf[c] }, measureCollapsed(c)));
      }
    }
    for (const n of kids.nodes) items.push(Object.assign({ key: 'n' + n, order: n }, measureNode(n)));
    items.sort((a, b) => a.order - b.order);

    const count = items.length, index = new Map(items.map((it, i) => [it.key, i]));
    const succ = items.map(() => []);
    for (const [a, b] of (local.get(owner) || new Map()).values()) {
      const i = index.get(a), j = index.get(b);
      if (i !== undefined && j !== undefined && i !== j) succ[i].push(j);
    }
    // Depth-first search keeps tree and forward edges; back edges close cycles.
    const state = new Uint8Array(count), dag = items.map(() => []);
    for (let s = 0; s < count; s++) {
      if (state[s]) continue;
      const stack = [[s, 0]];
      state[s] = 1;
      while (stack.length) {
        const top = stack[stack.length - 1], v = top[0];
        if (top[1] < succ[v].length) {
          const w = succ[v][top[1]++];
          if (state[w] === 0) { state[w] = 1; dag[v].push(w); stack.push([w, 0]); }
          else if (state[w] === 2) dag[v].push(w);
        } else { state[v] = 2; stack.pop(); }
      }
    }
    // Longest path from the sources.
    const pred = items.map(() => []), indeg = new Int32Array(count), layer = new Int32Array(count);
    dag.forEach((ws, v) => ws.forEach(w => { pred[w].push(v); indeg[w]++; }));
    const queue = [];
    for (let v = 0; v < count; v++) if (!indeg[v]) queue.push(v);
    for (let q = 0; q < queue.length; q++) {
      const v = queue[q];
      for (const w of dag[v]) {
        layer[w] = Math.max(layer[w], layer[v] + 1);
        if (--indeg[w] === 0) queue.push(w);
      }
    }
    const rows = [];
    for (let v = 0; v < count; v++) (rows[layer[v]] = rows[layer[v]] || []).push(v);
    const layers = rows.filter(r => r);
    // Barycentre ordering, a few sweeps each way.
    const pos = new Float64Array(count);
    const number = () => layers.forEach(r => r.forEach((v, i) => { pos[v] = i - r.length / 2; }));
    number();
    for (let sweep = 0; sweep < 4; sweep++) {
      const down = sweep % 2 === 0, order = down ? layers : layers.slice().reverse();
      for (const r of order) {
        const bary = new Map();
        for (const v of r) {
          const ns = down ? pred[v] : dag[v];
          if (ns.length) bary.set(v, ns.reduce((s, u) => s + pos[u], 0) / ns.length);
        }
        r.sort((a, b) => (bary.has(a) ? bary.get(a) : pos[a]) - (bary.has(b) ? bary.get(b) : pos[b]));
        r.forEach((v, i) => { pos[v] = i - r.length / 2; });
      }
    }
    // Coordinates. A layer much wider than the box is square wraps into several lines.
    const area = items.reduce((s, it) => s + (it.w + GAP_X) * (it.h + GAP_Y), 0);
    const maxLine = Math.max(900, 1.8 * Math.sqrt(area));
    const lines = [];
    for (const r of layers) {
      let line = [], width = 0;
      for (const v of r) {
        if (line.length && width + items[v].w > maxLine) { lines.push(line); line = []; width = 0; }
        line.push(v);
        width += items[v].w + GAP_X;
      }
      if (line.length) lines.push(line);
    }
    const top = owner < 0 ? 0 : HEADER + PAD, left = owner < 0 ? 0 : PAD;
    let y = top, width = 0;
    const lineWidth = lines.map(l => l.reduce((s, v) => s + items[v].w, 0) + GAP_X * (l.length - 1));
    width = Math.max(0, ...lineWidth);
    lines.forEach((l, li) => {
      let x = left + (width - lineWidth[li]) / 2, height = 0;
      for (const v of l) {
        items[v].x = x;
        items[v].y = y;
        x += items[v].w + GAP_X;
        height = Math.max(height, items[v].h);
      }
      y += height + GAP_Y;
    });
    const contentH = lines.length ? y - GAP_Y : y;
    let w = width + 2 * left, h = contentH + (owner < 0 ? 0 : PAD);
    if (owner >= 0) {
      const title = (clusters[owner][C_LABEL].length + 12) * CHAR_W + 2 * PAD;
      if (title > w) {
        const shift = (title - w) / 2;
        items.forEach(it => { it.x += shift; });
        w = title;
      }
    }
    return { items, w, h };
  }

  function place(layout, ox, oy) {
    for (const it of layout.items) {
      const box = { x: ox + it.x, y: oy + it.y, w: it.w, h: it.h, expanded: !!it.sub };
      boxes.set(it.key, box);
      if (it.sub) place(it.sub, box.x, box.y);
    }
  }

  //===-- Drawing -------------------------------------------------------------===//

  function clusterFill(c, defs) {
    const counts = [...devCount[c].entries()].sort((a, b) => a[0] - b[0]);
    if (counts.length === 1) return deviceColor(counts[0][0]);
    // Mixed devices: bands in proportion to node counts.
    const id = 'mix' + c;
    const g = el('linearGradient', { id }, defs);
    let total = 0, at = 0;
    counts.forEach(([, k]) => { total += k; });
    for (const [d, k] of counts) {
      el('stop', { offset: at / total, 'stop-color': deviceColor(d) }, g);
      at += k;
      el('stop', { offset: at / total, 'stop-color': deviceColor(d) }, g);
    }
    return 'url(#' + id + ')';
  }

  function render() {
    const edges = visibleEdges();
    const layout = layoutBox(-1, localEdges(edges));
    boxes = new Map();
    place(layout, 0, 0);
    graph.layoutSize = { w: layout.w, h: layout.h };

    viewport.textContent = '';
    const defs = el('defs', {}, viewport);
    for (const [id, color] of [['arrow', '#999'], ['arrowx', '#d62f1f']]) {
      const m = el('marker', { id, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 9,
        markerHeight: 9, markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse' }, defs);
      el('path', { d: 'M0,0 L10,5 L0,10 z', fill: color }, m);
    }
    const frames = el('g', { class: 'frames' }, viewport);
    const edgeLayer = el('g', { class: 'edges' }, viewport);
    const boxLayer = el('g', { class: 'boxes' }, viewport);

    const keys = [...boxes.keys()].sort((a, b) => containers(a).length - containers(b).length);
    for (const key of keys) {
      const b = boxes.get(key), i = +key.slice(1);
      if (key[0] === 'c') {
        const tower = clusters[i][C_TOWER] ? ' tower' : '';
        const faded = !b.expanded && focusDev >= 0 && !devCount[i].has(focusDev) ? ' faded' : '';
        const g = el('g', { class: 'cluster ' + (b.expanded ? 'expanded' : 'collapsed') + tower + faded,
          'data-key': key, 'data-label': clusters[i][C_LABEL] }, b.expanded ? frames : boxLayer);
        if (b.expanded) {
          el('rect', { class: 'frame', x: b.x, y: b.y, width: b.w, height: b.h, rx: 8 }, g);
          const header = el('g', { class: 'header' }, g);
          el('rect', { x: b.x, y: b.y, width: b.w, height: HEADER, fill: 'transparent' }, header);
          el('text', { x: b.x + 10, y: b.y + 16, 'font-size': 12, 'font-weight': 600 }, header)
            .textContent = '\u25be ' + clusters[i][C_LABEL] + '  (' + clusters[i][C_TOTAL] + ')';
        } else {
          el('rect', { x: b.x, y: b.y, width: b.w, height: b.h, rx: 9, fill: clusterFill(i, defs) }, g);
          el('text', { x: b.x + b.w / 2, y: b.y + 20, 'text-anchor': 'middle', 'font-size': 12,
            'font-weight': 600 }, g).textContent = '\u25b8 ' + clusters[i][C_LABEL];
          el('text', { x: b.x + b.w / 2, y: b.y + 37, 'text-anchor': 'middle', 'font-size': 10,
            fill: '#333' }, g).textContent = clusterCaption(i);
        }
      } else {
        const faded = focusDev >= 0 && nodes[i][N_DEV] !== focusDev ? ' faded' : '';
        const g = el('g', { class: 'node' + faded, 'data-key': key, 'data-name': nodes[i][N_NAME] },
          boxLayer);
        el('rect', { x: b.x, y: b.y, width: b.w, height: b.h, rx: 6, fill: deviceColor(nodes[i][N_DEV]) }, g);
        el('text', { x: b.x + b.w / 2, y: b.y + 14, 'text-anchor': 'middle', 'font-size': 11 }, g)
          .textContent = leafName(i);
        el('text', { x: b.x + b.w / 2, y: b.y + 27, 'text-anchor': 'middle', 'font-size': 9,
          fill: '#444' }, g).textContent = nodes[i][N_OP];
      }
    }
    let crossing = 0;
    for (const e of edges) {
      const a = boxes.get(e.from), b = boxes.get(e.to);
      if (!a || !b) continue;
      const sx = a.x + a.w / 2, sy = a.y + a.h, tx = b.x + b.w / 2, ty = b.y;
      const dy = Math.max(24, Math.abs(ty - sy) / 2);
      const p = el('path', { class: 'edge' + (e.cross ? ' cross' : ''), 'data-from': e.from,
        'data-to': e.to, d: `M${sx},${sy} C${sx},${sy + dy} ${tx},${ty - dy} ${tx},${ty}`,
        'marker-end': e.cross ? 'url(#arrowx)' : 'url(#arrow)' }, edgeLayer);
      el('title', {}, p).textContent = describe(e.from) + ' \u2192 ' + describe(e.to) + ': ' +
        e.count + (e.count === 1 ? ' edge' : ' edges') +
        (e.cross ? ', crosses devices (' + mib(e.crossBytes) + ' per step)' : '');
      if (e.cross) crossing++;
    }
    applyView();
    markSelected();
    status.textContent = nodes.length + ' nodes, ' + clusters.length + ' boxes; showing ' +
      boxes.size + ' items and ' + edges.length + ' edges (' + crossing + ' crossing devices, red). ' +
      'Wheel: zoom \u00b7 drag: pan \u00b7 click a box: expand or collapse \u00b7 click a node: details';
    document.getElementById('expand-level').disabled = nextLevelSize() > 4000;
  }

  function describe(key) {
    const i = +key.slice(1);
    return key[0] === 'n' ? nodes[i][N_NAME] : clusters[i][C_LABEL];
  }

  //===-- View: pan, zoom, fit ------------------------------------------------===//

  function applyView() {
    viewport.setAttribute('transform', `translate(${view.x},${view.y}) scale(${view.k})`);
  }
  function fit() {
    const cw = canvas.clientWidth || 800, ch = canvas.clientHeight || 600;
    const { w, h } = graph.layoutSize;
    view.k = Math.min(1.4, (cw - 40) / Math.max(w, 1), (ch - 40) / Math.max(h, 1));
    view.x = (cw - w * view.k) / 2;
    view.y = Math.max(20, (ch - h * view.k) / 2);
    applyView();
  }
  function centerOn(key) {
    const b = boxes.get(key);
    if (!b) return;
    const cw = canvas.clientWidth, ch = canvas.clientHeight;
    view.k = Math.max(view.k, 0.8);
    view.x = cw / 2 - (b.x + b.w / 2) * view.k;
    view.y = ch / 2 - (b.y + b.h / 2) * view.k;
    applyView();
  }

  let drag = null, dragged = false;
  canvas.addEventListener('mousedown', e => {
    drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, moved: false };
  });
  window.addEventListener('mousemove', e => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; canvas.classList.add('dragging'); }
    view.x = drag.vx + dx;
    view.y = drag.vy + dy;
    applyView();
  });
  window.addEventListener('mouseup', () => {
    dragged = !!(drag && drag.moved);
    drag = null;
    canvas.classList.remove('dragging');
  });
  canvas.addEventListener('wheel', e => {
    e.preventDefault();
    const r = canvas.getBoundingClientRect(), mx = e.clientX - r.left, my = e.clientY - r.top;
    const k = Math.min(8, Math.max(0.02, view.k * Math.exp(-e.deltaY * 0.0015)));
    view.x = mx - (mx - view.x) * k / view.k;
    view.y = my - (my - view.y) * k / view.k;
    view.k = k;
    applyView();
  }, { passive: false });

  canvas.addEventListener('click', e => {
    if (dragged) return;
    const target = e.target.closest('.node, .cluster');
    if (!target) return;
    const key = target.getAttribute('data-key');
    if (key[0] === 'n') { select(key); return; }
    const c = +key.slice(1);
    if (target.classList.contains('expanded') && !e.target.closest('.header')) return;
    toggle(c);
    select(key);
  });

  // Expands or collapses a box, keeping it where it was on screen.
  function toggle(c) {
    const before = boxes.get('c' + c);
    if (expanded.has(c)) expanded.delete(c); else expanded.add(c);
    render();
    const after = boxes.get('c' + c);
    if (before && after) {
      view.x += (before.x - after.x) * view.k;
      view.y += (before.y - after.y) * view.k;
      applyView();
    }
  }

  function nextLevelSize() {
    let size = boxes.size;
    for (const key of boxes.keys()) {
      if (key[0] !== 'c' || expanded.has(+key.slice(1))) continue;
      const k = kidsOf[+key.slice(1)];
      size += k.clusters.length + k.nodes.length - 1;
    }
    return size;
  }

  //===-- Details -------------------------------------------------------------===//

  function select(key) {
    selected = key;
    markSelected();
    if (key[0] === 'n') showNode(+key.slice(1)); else showCluster(+key.slice(1));
  }
  function markSelected() {
    viewport.querySelectorAll('.selected').forEach(x => x.classList.remove('selected'));
    viewport.querySelectorAll('.hot').forEach(x => x.classList.remove('hot'));
    if (!selected) return;
    const g = viewport.querySelector(`[data-key="${selected}"]`);
    if (g) g.classList.add('selected');
    viewport.querySelectorAll(`[data-from="${selected}"], [data-to="${selected}"]`)
      .forEach(x => x.classList.add('hot'));
  }
  function reveal(n) {
    for (let c = nodes[n][N_CLUSTER]; c >= 0; c = clusters[c][C_PARENT]) expanded.add(c);
    render();
    select('n' + n);
    centerOn('n' + n);
  }

  function row(table, label, value) {
    const tr = html('tr', undefined, table);
    html('td', label, tr);
    const td = html('td', undefined, tr);
    if (value instanceof Node) td.appendChild(value); else td.textContent = value;
    return td;
  }
  function deviceCell(d) {
    const span = document.createElement('span');
    const sw = html('span', undefined, span, 'swatch');
    sw.style.background = deviceColor(d);
    span.appendChild(document.createTextNode(deviceName(d)));
    return span;
  }
  function nodeLink(n, suffix) {
    const span = html('span', nodes[n][N_NAME], undefined, 'link');
    span.addEventListener('click', () => reveal(n));
    const wrap = document.createElement('div');
    wrap.appendChild(span);
    if (suffix) wrap.appendChild(document.createTextNode(' ' + suffix));
    return wrap;
  }
  function scopePath(c) {
    const parts = [];
    for (; c >= 0; c = clusters[c][C_PARENT]) parts.push(clusters[c][C_LABEL]);
    return parts.reverse().join(' \u203a ') || '(top level)';
  }

  function showNode(n) {
    const d = nodes[n];
    panel.textContent = '';
    html('h2', d[N_NAME], panel);
    const t = html('table', undefined, panel);
    row(t, 'op', d[N_OP]);
    row(t, 'device', deviceCell(d[N_DEV]));
    row(t, 'requested', d[N_REQ] || '\u2014');
    row(t, 'reason', d[N_REASON] || '\u2014');
    row(t, 'tower', d[N_TOWER] >= 0 ? String(d[N_TOWER]) : '\u2014');
    row(t, 'box', scopePath(d[N_CLUSTER]));
    row(t, 'outputs', d[N_OUTS].map(o => o[0] + ' (' + mib(o[1]) + ')').join(', ') || '\u2014');
    const ins = document.createElement('div');
    const ops = d[N_OPERANDS];
    for (let k = 0; k < ops.length; k += 2) {
      const p = nodes[ops[k]], out = p[N_OUTS][ops[k + 1]];
      const across = p[N_DEV] !== d[N_DEV] ? ' from ' + deviceName(p[N_DEV]) : '';
      ins.appendChild(nodeLink(ops[k], (p[N_OUTS].length > 1 ? ':' + ops[k + 1] + ' ' : '') +
        (out ? out[0] : '') + across));
    }
    row(t, 'inputs', ops.length ? ins : '\u2014');
    const outs = document.createElement('div');
    [...new Set(usersOf[n])].slice(0, 200).forEach(u => outs.appendChild(nodeLink(u,
      nodes[u][N_DEV] !== d[N_DEV] ? 'on ' + deviceName(nodes[u][N_DEV]) : '')));
    row(t, 'consumers', usersOf[n].length ? outs : '\u2014');
    row(t, 'attributes', d[N_ATTRS] || '\u2014');
  }

  function showCluster(c) {
    panel.textContent = '';
    html('h2', clusters[c][C_LABEL], panel);
    const t = html('table', undefined, panel);
    row(t, 'box', scopePath(c));
    row(t, 'nodes', String(clusters[c][C_TOTAL]));
    const devs = document.createElement('div');
    [...devCount[c].entries()].sort((a, b) => a[0] - b[0]).forEach(([dv, k]) => {
      const line = html('div', undefined, devs);
      line.appendChild(deviceCell(dv));
      line.appendChild(document.createTextNode(': ' + k));
    });
    row(t, 'devices', devs);
    const ops = new Map();
    const walk = x => {
      kidsOf[x].nodes.forEach(n => ops.set(nodes[n][N_OP], (ops.get(nodes[n][N_OP]) || 0) + 1));
      kidsOf[x].clusters.forEach(walk);
    };
    walk(c);
    row(t, 'ops', [...ops.entries()].sort((a, b) => b[1] - a[1]).slice(0, 14)
      .map(([op, k]) => op + ' ' + k).join(', '));
    html('p', expanded.has(c) ? 'Click its title to collapse it.' : 'Click it to expand it.', panel, 'muted');
  }

  // The cluster the plan was placed for: its devices, then its links.
  function clusterTables(cluster) {
    const box = document.createElement('div');
    const grid = (header, rows) => {
      const table = html('table', undefined, box, 'devtable');
      const head = html('tr', undefined, table);
      header.forEach(h => html('th', h, head));
      rows.forEach(cells => {
        const tr = html('tr', undefined, table);
        cells.forEach(c => html('td', c, tr));
      });
    };
    const gib = b => (b / 1073741824).toFixed(b >= 1073741824 ? 0 : 3) + ' GiB';
    grid(['device', 'kind', 'memory', 'speed'], cluster.devices.map(d =>
      [d.name, d.kind, gib(d.memory_bytes), String(d.relative_speed)]));
    if (cluster.links && cluster.links.length)
      grid(['link', 'GB/s each way'], cluster.links.map(l =>
        [l.endpoints.join(' \u2013 '), String(+(l.bandwidth / 1e9).toPrecision(4))]));
    return box;
  }

  function showSummary() {
    panel.textContent = '';
    html('h2', DATA.module + (DATA.graphs.length > 1 ? ' / ' + graph.name : ''), panel);
    const t = html('table', undefined, panel);
    if (DATA.meta) row(t, 'module', DATA.meta);
    (DATA.decisions || []).forEach(([label, text]) => row(t, label, text));
    if (DATA.cluster && DATA.cluster.devices) row(t, 'cluster', clusterTables(DATA.cluster));
    row(t, 'nodes', String(nodes.length));
    const per = new Map();
    nodes.forEach(n => per.set(n[N_DEV], (per.get(n[N_DEV]) || 0) + 1));
    const devs = document.createElement('div');
    [...per.entries()].sort((a, b) => a[0] - b[0]).forEach(([dv, k]) => {
      const line = html('div', undefined, devs);
      line.appendChild(deviceCell(dv));
      line.appendChild(document.createTextNode(': ' + k + ' nodes'));
    });
    row(t, 'devices', devs);
    html('p', 'Towers and name scopes start collapsed. Click a box to open it, a node for its ' +
      'device, requested device and placement reason. Red edges cross devices.', panel, 'muted');
  }

  //===-- The run: loss curve and busy time per device ----------------------===//

  function svgText(parent, x, y, text, attrs) {
    el('text', Object.assign({ x, y, 'font-size': 10, fill: '#555' }, attrs || {}), parent)
      .textContent = text;
  }
  function num(v) {
    const tiny = v !== 0 && Math.abs(v) < 0.01;
    return Math.abs(v) >= 1000 || tiny ? v.toExponential(2) : String(+v.toPrecision(4));
  }

  // Training loss over steps (a line), evaluation loss and accuracy (points, accuracy on the
  // right axis), the learning rate below when it changes; the pointer reads a step off.
  function lossChart(m, box) {
    const steps = m.steps, evals = m.evals, accuracy = evals.some(e => e[2] !== null);
    const W = 314, H = 150, L = 40, R = accuracy ? 34 : 8, T = 8, B = 18;
    html('h3', 'Loss', box);
    const x0 = Math.min(steps[0][0], evals.length ? evals[0][0] : Infinity);
    const x1 = Math.max(steps[steps.length - 1][0], evals.length ? evals[evals.length - 1][0] : -Infinity);
    let lo = Infinity, hi = -Infinity;
    for (const s of steps) if (isFinite(s[1])) { lo = Math.min(lo, s[1]); hi = Math.max(hi, s[1]); }
    for (const e of evals) if (isFinite(e[1])) { lo = Math.min(lo, e[1]); hi = Math.max(hi, e[1]); }
    if (!(hi > lo)) { lo -= 0.5; hi += 0.5; }
    const sx = v => L + (x1 > x0 ? (v - x0) / (x1 - x0) : 0.5) * (W - L - R);
    const sy = v => T + (hi - v) / (hi - lo) * (H - T - B);
    const chart = el('svg', { class: 'chart', width: W, height: H }, box);
    el('rect', { x: L, y: T, width: W - L - R, height: H - T - B, fill: '#fff', stroke: '#ddd' }, chart);
    svgText(chart, L - 3, T + 8, num(hi), { 'text-anchor': 'end' });
    svgText(chart, L - 3, H - B, num(lo), { 'text-anchor': 'end' });
    svgText(chart, L, H - 5, 'step ' + x0);
    svgText(chart, W - R, H - 5, String(x1), { 'text-anchor': 'end' });
    // A line through the steps whose value (column k) is finite.
    const line = (k, y) => steps.filter(s => isFinite(s[k]))
      .map(s => sx(s[0]).toFixed(1) + ',' + y(s[k]).toFixed(1)).join(' ');
    el('polyline', { class: 'loss', points: line(1, sy) }, chart);
    if (accuracy) {
      svgText(chart, W - R + 3, T + 8, '100%');
      svgText(chart, W - R + 3, H - B, '0%');
    }
    const ay = v => T + (1 - v) * (H - T - B);
    for (const e of evals) {
      el('circle', { class: 'eval-loss', cx: sx(e[0]), cy: sy(e[1]), r: 3 }, chart);
      if (e[2] !== null)
        el('circle', { class: 'accuracy', cx: sx(e[0]), cy: ay(e[2]), r: 3 }, chart);
    }
    const cursor = el('line', { class: 'cursor', x1: -10, x2: -10, y1: T, y2: H - B }, chart);
    const readout = html('div', '', box, 'readout');
    const legend = 'train loss (line)' +
      (evals.length ? ' \u00b7 eval loss (orange)' : '') +
      (accuracy ? ' \u00b7 eval accuracy (green, right axis)' : '');
    readout.textContent = legend;
    chart.addEventListener('mousemove', e => {
      const r = chart.getBoundingClientRect(), want = x0 + (e.clientX - r.left - L) / (W - L - R) * (x1 - x0);
      let a = 0, b = steps.length - 1;
      while (a < b) { const mid = (a + b) >> 1; if (steps[mid][0] < want) a = mid + 1; else b = mid; }
      if (a > 0 && want - steps[a - 1][0] < steps[a][0] - want) a--;
      const s = steps[a], ev = evals.find(x => x[0] === s[0]);
      cursor.setAttribute('x1', sx(s[0]));
      cursor.setAttribute('x2', sx(s[0]));
      readout.textContent = 'step ' + s[0] + ': loss ' + num(s[1]) + ', lr ' + num(s[2]) +
        (ev ? '; eval loss ' + num(ev[1]) +
          (ev[2] !== null ? ', accuracy ' + (100 * ev[2]).toFixed(1) + '%' : '') : '');
    });
    chart.addEventListener('mouseleave', () => {
      cursor.setAttribute('x1', -10);
      cursor.setAttribute('x2', -10);
      readout.textContent = legend;
    });
    const lrLo = steps.reduce((v, s) => Math.min(v, s[2]), Infinity);
    const lrHi = steps.reduce((v, s) => Math.max(v, s[2]), -Infinity);
    if (lrHi > lrLo) {
      const h = 44, lr = el('svg', { class: 'chart', width: W, height: h }, box);
      const ly = v => 4 + (lrHi - v) / (lrHi - lrLo) * (h - 8);
      el('polyline', { class: 'lr', points: line(2, ly) }, lr);
      svgText(lr, L - 3, 12, num(lrHi), { 'text-anchor': 'end' });
      svgText(lr, L - 3, h - 4, num(lrLo), { 'text-anchor': 'end' });
      html('div', 'learning rate', box, 'readout');
    } else {
      html('div', 'learning rate ' + num(lrLo) + ' throughout', box, 'readout');
    }
    html('div', m.file + ': ' + steps.length + ' steps, ' + evals.length + ' evaluations', box, 'muted');
  }

  // Work in solid colours; the idle parts (waits, launch gaps, other) striped or blank.
  const stripes = c => 'repeating-linear-gradient(135deg, #fff 0 3px, ' + c + ' 3px 5px)';
  const PART_COLORS = { 'collectives': '#9141ac', 'copies h2d': '#e5a50a', 'copies d2d': '#f6d32d',
    'copies d2h': '#f9f06b', 'waits': stripes('#b0b0b0'), 'host': '#5e5c64',
    'launch gaps': stripes('#dcdcdc'), 'other': '#fff' };
  const ms = v => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toPrecision(2)) + ' ms';

  // Each device's mean step as a bar of its parts: kernels (busy) in the device's colour.
  function busyBars(t, box) {
    html('h3', 'Busy time per step', box);
    html('div', 'A device is busy while at least one of its kernels runs. Mean of steps ' +
      t.averaged[0] + '\u2013' + t.averaged[1] + ' (' + ms(t.wall_ms) + ' each)' +
      (t.profiled_steps > 1 ? '; step 1 took ' + ms(t.first_step_ms) + ' (setup)' : '') + '.', box, 'muted');
    const byName = new Map(t.devices.map(d => [d[0], d]));
    DATA.devices.forEach(([name, color], di) => {
      const d = byName.get(name);
      if (!d) return;
      const line = html('div', undefined, box, 'busy');
      line.setAttribute('data-device', name);
      line.title = t.parts.map((p, k) => p + ' ' + ms(d[2][k])).join('\n');
      const label = html('span', undefined, line, 'busy-name');
      label.appendChild(deviceCell(di));
      const bar = html('span', undefined, line, 'bar');
      t.parts.forEach((p, k) => {
        if (!(d[2][k] > 0)) return;
        const seg = html('span', undefined, bar);
        seg.style.width = (100 * d[2][k] / t.wall_ms).toFixed(2) + '%';
        seg.style.background = PART_COLORS[p] || '#eee';
        if (k === 0) { seg.style.background = color; seg.className = 'kernels'; }
      });
      html('span', ms(d[1]) + ' ' + (100 * d[1] / t.wall_ms).toFixed(0) + '%', line, 'busy-ms');
      line.addEventListener('click', () => {
        focusDev = focusDev === di ? -1 : di;
        box.querySelectorAll('.busy').forEach(x => x.classList.toggle('focus', x === line && focusDev >= 0));
        render();
      });
    });
    const key = html('div', undefined, box, 'muted');
    key.textContent = 'Bars: kernels (busy) in the device\u2019s colour, collectives purple, copies ' +
      'yellow, host dark grey, waits and launch gaps striped (hover for each part). Click a device ' +
      'to fade the others\u2019 nodes.';
    html('div', t.file + ': ' + t.profiled_steps + ' steps traced', box, 'muted');
  }

  function showRun(run) {
    const box = document.getElementById('run');
    document.body.classList.add('has-run');
    if (run.metrics && run.metrics.steps.length) lossChart(run.metrics, box);
    if (run.trace) busyBars(run.trace, box);
    // The details start where the run's panel ends (at most 62% of the window; it scrolls).
    const below = () => { panel.style.top = box.getBoundingClientRect().bottom + 'px'; };
    below();
    window.addEventListener('resize', below);
  }

  //===-- Search and buttons --------------------------------------------------===//

  search.addEventListener('input', () => {
    const q = search.value.trim().toLowerCase();
    matches.textContent = '';
    if (!q) { matches.style.display = 'none'; return; }
    let shown = 0;
    for (let i = 0; i < nodes.length && shown < 60; i++) {
      if (!nodes[i][N_NAME].toLowerCase().includes(q)) continue;
      const m = html('div', nodes[i][N_NAME] + '  \u00b7 ' + nodes[i][N_OP] + ' \u00b7 ' +
        deviceName(nodes[i][N_DEV]), matches);
      m.addEventListener('mousedown', ev => { ev.preventDefault(); pick(i); });
      shown++;
    }
    const r = search.getBoundingClientRect();
    matches.style.left = r.left + 'px';
    matches.style.display = shown ? 'block' : 'none';
  });
  search.addEventListener('keydown', e => {
    if (e.key === 'Enter' && matches.firstChild) {
      e.preventDefault();
      matches.firstChild.dispatchEvent(new MouseEvent('mousedown'));
    }
    if (e.key === 'Escape') { matches.style.display = 'none'; search.blur(); }
  });
  search.addEventListener('blur', () => { matches.style.display = 'none'; });
  function pick(n) { matches.style.display = 'none'; reveal(n); }

  document.getElementById('fit').addEventListener('click', fit);
  document.getElementById('collapse').addEventListener('click', () => {
    expanded = new Set();
    render();
    fit();
  });
  document.getElementById('expand-level').addEventListener('click', () => {
    for (const key of [...boxes.keys()]) if (key[0] === 'c') expanded.add(+key.slice(1));
    render();
    fit();
  });
  window.addEventListener('keydown', e => {
    if (e.target === search) return;
    if (e.key === 'f') fit();
    if (e.key === '/') { e.preventDefault(); search.focus(); }
  });

  //===-- Start ---------------------------------------------------------------===//

  document.getElementById('title').textContent = DATA.module;
  const legend = document.getElementById('legend');
  DATA.devices.forEach(([name, color]) => {
    const item = html('span', undefined, legend);
    const sw = html('span', undefined, item, 'swatch');
    sw.style.background = color;
    item.appendChild(document.createTextNode(name));
  });
  const picker = document.getElementById('graph');
  if (DATA.graphs.length > 1) {
    DATA.graphs.forEach((g, i) => { html('option', g.name, picker).value = i; });
    picker.addEventListener('change', () => loadGraph(+picker.value));
  } else {
    picker.style.display = 'none';
  }
  svg = el('svg', { xmlns: SVGNS }, canvas);
  viewport = el('g', { id: 'viewport' }, svg);
  window.addEventListener('resize', applyView);
  if (DATA.run) showRun(DATA.run);
  if (DATA.graphs.length) {
    loadGraph(0);
    applyHash();
  }
  window.addEventListener('hashchange', applyHash);
  document.body.setAttribute('data-ready', '1');
  document.body.setAttribute('data-render-ms', Math.round(performance.now() - started));

  // "#expand=tower 0,tower 1/dense&select=<node name>" opens boxes (by label, or by the
  // labels of their path joined with '/') and selects a node, so a view can be linked to.
  function applyHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    const wanted = (params.get('expand') || '').split(',').map(s => s.trim()).filter(s => s);
    if (wanted.length) {
      const path = c => (clusters[c][C_PARENT] >= 0 ? path(clusters[c][C_PARENT]) + '/' : '') +
        clusters[c][C_LABEL];
      clusters.forEach((c, i) => {
        if (wanted.includes(c[C_LABEL]) || wanted.includes(path(i)))
          for (let x = i; x >= 0; x = clusters[x][C_PARENT]) expanded.add(x);
      });
      render();
      fit();
    }
    const name = params.get('select');
    if (name) {
      const n = nodes.findIndex(d => d[N_NAME] === name);
      if (n >= 0) reveal(n);
    }
  }
})();
