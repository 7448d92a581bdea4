// The rules page's "New rule" form: show the conversation or the agent field as the scope needs,
// and drop a simulation once the form changes (its Save would save a rule it did not simulate).
(function () {
  function showScopeFields(form) {
    var scope = form.querySelector("[data-rule-scope]");
    if (!scope) return;
    form.querySelectorAll("[data-for-scope]").forEach(function (field) {
      field.hidden = field.dataset.forScope.split(" ").indexOf(scope.value) < 0;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".rule-form").forEach(function (form) {
      showScopeFields(form);
      form.addEventListener("change", function () { showScopeFields(form); });
      form.addEventListener("input", function (event) {
        var simulation = form.querySelector("#simulation");
        if (simulation && !simulation.contains(event.target)) simulation.replaceChildren();
      });
    });
  });
})();
