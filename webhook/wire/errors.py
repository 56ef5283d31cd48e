"""The two ways an admission request can be wrong, kept apart as kopf keeps them.

``BadRequest`` means the request itself is broken (a malformed AdmissionReview, a body that is not
an object): the caller answers with an error status, not with a verdict on any object.
``InvalidObject`` means the request is fine but the object in it is not: the caller denies it and
shows the field errors, worded like Kubernetes' own ``field.Error`` so users meet a familiar shape.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


class BadRequest(Exception):  # noqa: N818 - the brief names both families after kopf
    """The request is malformed; there is no object to judge."""


@dataclass(frozen=True)
class FieldError:
    """One problem at one field, printed as Kubernetes prints ``field.Error``.

    ``kind`` is Kubernetes' error type word ("Invalid value", "Required value", …); nearly every
    error here is "Invalid value", so it defaults to that.
    """

    path: str
    message: str
    kind: str = "Invalid value"

    def __str__(self) -> str:
        return f"{self.path}: {self.kind}: {self.message}" if self.message else f"{self.path}: {self.kind}"


class InvalidObject(Exception):  # noqa: N818 - named for what it means, not its type
    """The object cannot be admitted as written; carries every field error found."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        super().__init__(self.errors)

    @classmethod
    def at(cls, path: str, message: str, kind: str = "Invalid value") -> InvalidObject:
        """Shorthand for the common single-error case."""
        return cls([FieldError(path, message, kind)])

    def __str__(self) -> str:
        # Kubernetes' utilerrors.NewAggregate prints one error bare and several as "[a, b]".
        if len(self.errors) == 1:
            return str(self.errors[0])
        return "[" + ", ".join(str(e) for e in self.errors) + "]"
