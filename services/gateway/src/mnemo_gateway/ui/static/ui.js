// Mnemo's web UI works without this script; it only adds a "select all" box to bulk forms.
"use strict";
document.querySelectorAll("input[data-select-all]").forEach(function (all) {
  all.addEventListener("change", function () {
    document.querySelectorAll("input[name='" + all.dataset.selectAll + "']").forEach(function (box) {
      box.checked = all.checked;
    });
  });
});
