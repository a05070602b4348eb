"""Type stubs of the native module `adze._adze` (re-exported by `adze`)."""

from os import PathLike
from typing import Any, Iterable, Literal, Mapping, Optional, Union

__version__: str

Stage = Literal["parsed", "inlined", "ad", "optimized", "all"]
Inline = Literal["none", "early", "late", "all"]

class Error(Exception):
    """An error of adze; `str(e)` is the `adze` command's one line."""

    details: str  # a diagnostic's rendered source excerpt (diagnostics only)

def compile(
    source: str,
    name: str = "<string>",
    *,
    inline: Inline = "all",
    optimize: bool = True,
    timeout: Optional[float] = None,
    max_call_depth: Optional[int] = None,
    tape_limit: Optional[int] = None,
    checkpoint: bool = False,
) -> Program: ...
def load(
    path: Union[str, PathLike[str]],
    *,
    inline: Inline = "all",
    optimize: bool = True,
    timeout: Optional[float] = None,
    max_call_depth: Optional[int] = None,
    tape_limit: Optional[int] = None,
    checkpoint: bool = False,
) -> Program: ...

class Program:
    @property
    def functions(self) -> list[str]: ...
    def function(self, name: str) -> Function: ...
    def gradient(self, name: str, wrt: Union[str, Iterable[str], None] = None) -> Gradient: ...
    def jvp(self, name: str, wrt: Union[str, Iterable[str], None] = None) -> Jvp: ...
    def dump(self, name: Optional[str] = None, stage: Stage = "parsed") -> str: ...

class Function:
    @property
    def name(self) -> str: ...
    @property
    def params(self) -> list[tuple[str, str]]: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

class Gradient:
    @property
    def name(self) -> str: ...
    @property
    def wrt(self) -> list[str]: ...
    @property
    def params(self) -> list[tuple[str, str]]: ...
    def __call__(self, *args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]: ...

class Jvp:
    @property
    def name(self) -> str: ...
    @property
    def wrt(self) -> list[str]: ...
    @property
    def params(self) -> list[tuple[str, str]]: ...
    def __call__(
        self, *args: Any, tangents: Optional[Mapping[str, Any]] = None, **kwargs: Any
    ) -> tuple[Any, Any]: ...
