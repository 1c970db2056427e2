"""Forms of the site core (import, fork). Engine errors become form errors at this edge."""

from __future__ import annotations

from django import forms


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault(
            "widget",
            MultipleFileInput(
                attrs={"accept": ".jsonl,application/jsonl,application/x-ndjson,text/plain"}
            ),
        )
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


class ImportForm(forms.Form):
    files = MultipleFileField(
        label="Session files",
        help_text="One or more Pi session files (.jsonl).",
    )


class ForkForm(forms.Form):
    cwd = forms.CharField(
        label="Working directory of the fork",
        required=False,
        max_length=4096,
        help_text="Leave empty to keep the session's working directory.",
    )
