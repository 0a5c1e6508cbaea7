"""Settings and URLs of the interop provider (see dot_server.py): django-oauth-toolkit with OIDC on."""
import os

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

HERE = os.path.dirname(os.path.abspath(__file__))
_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
_pem = _key.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()

SECRET_KEY = "interop-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "dotsite_urls"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions", "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware", "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["SESAME_DOT_DB"]}}
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates", "DIRS": [os.path.join(HERE, "templates")],
    "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
}]
LOGIN_URL = "/accounts/login/"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": _pem,
    "PKCE_REQUIRED": True,
    "ROTATE_REFRESH_TOKEN": True,
    "SCOPES": {"openid": "OpenID Connect", "profile": "Profile", "email": "Email", "offline_access": "Offline"},
}
