from django.http import HttpResponse


def registry_page(request):
    return HttpResponse("registry")
