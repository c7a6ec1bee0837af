/* flamegraph.js - the interactive part of the SVG flame graphs that
 * `pysample flamegraph` writes (pysample_tool/flamegraph.py embeds it).
 *
 * Plain ES5 so it runs in any browser that opens an SVG.  Reads the layout
 * from the fg:* attributes the generator writes: fg:x and fg:w are the
 * position and width of a box in samples, fg:l and fg:s the long and short
 * labels (default: the first title line, then the long label).  fit() must
 * agree with fit_label() in flamegraph.py.
 */
(function () {
  "use strict";
  var svg = document.documentElement;
  var total = +svg.getAttribute("fg:total");
  var xpad = +svg.getAttribute("fg:xpad");
  var usable = +svg.getAttribute("fg:usable");
  var details = document.getElementById("details");
  var matchedtxt = document.getElementById("matched");
  var unzoombtn = document.getElementById("unzoom");
  var searchbtn = document.getElementById("search");
  var frames = [];
  var all = document.getElementById("frames").getElementsByTagName("g");
  for (var i = 0; i < all.length; i++) {
    var g = all[i];
    var title = g.getElementsByTagName("title")[0].textContent;
    var rect = g.getElementsByTagName("rect")[0];
    var name = title.split("\n")[0];
    var longl = g.getAttribute("fg:l") || name;
    frames.push({
      g: g, rect: rect, text: g.getElementsByTagName("text")[0],
      x: +g.getAttribute("fg:x"), w: +g.getAttribute("fg:w"), y: +rect.getAttribute("y"),
      name: name, info: title.replace(/\n/g, " \u2014 "),
      longl: longl, shortl: g.getAttribute("fg:s") || longl,
      fill: rect.getAttribute("fill")
    });
  }
  var byg = [];
  var zoomed = null, searchre = null;

  function fit(f, width) {
    var chars = Math.floor((width - 6) / (12 * 0.59));
    if (chars < 3) return "";
    if (f.longl.length <= chars) return f.longl;
    if (f.shortl.length <= chars) return f.shortl;
    return f.shortl.substring(0, chars - 2) + "..";
  }
  function place(f, x, width) {
    f.rect.setAttribute("x", x.toFixed(2));
    f.rect.setAttribute("width", width.toFixed(2));
    f.text.setAttribute("x", (x + 3).toFixed(2));
    f.text.textContent = fit(f, width);
  }
  function find(target) {
    while (target && target !== svg) {
      if (target.getAttribute && target.getAttribute("class") === "f") return target;
      target = target.parentNode;
    }
    return null;
  }
  function frameOf(g) {
    for (var i = 0; i < frames.length; i++) if (frames[i].g === g) return frames[i];
    return null;
  }
  function zoom(z) {
    zoomed = z;
    var zx = z ? z.x : 0, zw = z ? z.w : total, zy = z ? z.y : Infinity;
    var scale = usable / zw;
    for (var i = 0; i < frames.length; i++) {
      var f = frames[i];
      var cls = "f";
      if (f.y <= zy && f.x >= zx && f.x + f.w <= zx + zw) {
        place(f, xpad + (f.x - zx) * scale, f.w * scale);       /* the frame and its callees */
      } else if (f.y > zy && f.x <= zx && f.x + f.w >= zx + zw) {
        place(f, xpad, usable);                                 /* its callers */
        cls = "f parent";
      } else {
        cls = "f hide";
      }
      f.g.setAttribute("class", cls);
    }
    unzoombtn.setAttribute("class", z ? "button" : "button hide");
    if (searchre) search(searchre);
  }
  function search(re) {
    searchre = re;
    var spans = [];
    for (var i = 0; i < frames.length; i++) {
      var f = frames[i];
      if (re && re.test(f.name)) {
        f.rect.setAttribute("fill", "rgb(230,0,230)");
        spans.push([f.x, f.x + f.w]);
      } else {
        f.rect.setAttribute("fill", f.fill);
      }
    }
    if (!re) {
      matchedtxt.textContent = " ";
      searchbtn.textContent = "Search";
      return;
    }
    /* Matched share: the union of the matching boxes, so that recursion and
       nested matches are not counted twice. */
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var covered = 0, end = -1;
    for (var j = 0; j < spans.length; j++) {
      var s = spans[j][0] > end ? spans[j][0] : end;
      if (spans[j][1] > s) { covered += spans[j][1] - s; end = spans[j][1]; }
    }
    matchedtxt.textContent = "Matched: " + (100 * covered / total).toFixed(1) + "%";
    searchbtn.textContent = "Reset Search";
  }
  function askSearch() {
    if (searchre) { search(null); return; }
    var term = prompt("Search for frames matching (a regular expression, e.g. a function or file name):", "");
    if (term) {
      try { search(new RegExp(term)); }
      catch (e) { alert("Not a valid regular expression: " + e.message); }
    }
  }
  svg.addEventListener("click", function (e) {
    var g = find(e.target);
    if (g) { zoom(frameOf(g)); return; }
    if (e.target === unzoombtn) zoom(null);
    else if (e.target === searchbtn) askSearch();
  });
  svg.addEventListener("mouseover", function (e) {
    var g = find(e.target);
    if (g) details.textContent = frameOf(g).info;
  });
  svg.addEventListener("mouseout", function (e) {
    if (find(e.target)) details.textContent = " ";
  });
  /* Deep Python stacks make tall graphs: start where the root is. */
  window.addEventListener("load", function () {
    if (svg.getBoundingClientRect().height > window.innerHeight) {
      window.scrollTo(0, svg.getBoundingClientRect().height);
    }
  });
  window.addEventListener("keydown", function (e) {
    if ((e.ctrlKey || e.metaKey) && e.keyCode === 70) { e.preventDefault(); askSearch(); }
    else if (e.keyCode === 27) { search(null); zoom(null); }
  });
})();
